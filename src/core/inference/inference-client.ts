import * as grpc from '@grpc/grpc-js';
import {
  DATATYPE_BYTES,
  INFERENCE_SERVICE_NAME,
  MODEL_INFER_SPAN,
  EncodedInferRequest,
  elementCount,
  inferenceClientConstructor,
  inferRequestPrefix,
  isDatatype,
  modelInferRequestEncoder,
  startsWithPrefix,
  typedContentsToBytes,
  typedValueCount,
  type Datatype,
  type GRPCInferenceServiceClient,
  type InferRequestHeader,
  type ModelInferRequest,
  type ModelInferResponse__Output,
  type ModelMetadataResponse__Output,
} from '../../protocol/index.js';
import { ApiError } from '../errors.js';
import type { MaskModel } from '../image/pipeline.js';
import { inputShape, maskShape, type PreprocessingProfile } from '../image/profile.js';
import { isFramed, tensorOf, type ModelInput } from '../image/model-input.js';
import { tensorBytes, type MaskTensor } from '../image/tensor.js';
import { traceContextHeaders, traceStep } from '../../tracing/otel.js';
import { LEAST_REQUEST_POLICY, MODEL_METADATA_KEY, registerLeastRequestPolicy } from './least-request-balancer.js';

export interface InferenceTls {
  /** PEM of the CA that signed the servers' certificates. */
  ca: Buffer;
  /** PEM certificate and key of this client, for mutual TLS. */
  cert?: Buffer;
  key?: Buffer;
}

export interface InferenceClientOptions {
  /**
   * Where the Open Inference Protocol (KServe v2) servers are: `host:port`, a `dns:///name:port`
   * that resolves to several, or a list of `ip:port` addresses.
   */
  address: string | string[];
  /**
   * How calls are spread over several servers (least-request-balancer.ts). Default
   * `least-request`; `least-outstanding` counts calls open alone, without their times (for comparison).
   */
  balancing?: Balancing;
  /** Deadline of each ModelInfer call, in ms. */
  timeoutMs: number;
  /** Largest message sent or received, in bytes. */
  maxMessageBytes: number;
  /** Seconds a client is told to wait (Retry-After) when the server is down or busy. */
  retryAfterSeconds: number;
  tls?: InferenceTls;
}

/** How long "all servers full" is assumed to last before requests are let through to try again. */
const SATURATION_WINDOW_MS = 1000;

/** Tries of a call that servers answer "queue full", each balanced onto the next server, before every server counts as full. */
const QUEUE_FULL_ATTEMPTS = 4;

/** grpc-js's RESOURCE_EXHAUSTED for a message over `max_{send,receive}_message_length`, on either side. */
const OVERSIZED_MESSAGE = /message larger than max/i;

/** Largest ModelInfer request kept for a retry (the FP32 input of a 1024x1024 model is 12 MiB). */
const RETRY_BUFFER_BYTES = 64 * 1024 * 1024;

/**
 * One gRPC target for one or several servers: a list of IP addresses becomes an `ipv4:`/`ipv6:`
 * target (grpc-js resolves it to all of them); names need a `dns:///` target instead.
 */
export function grpcTarget(address: string | string[]): string {
  if (!Array.isArray(address)) return address;
  if (address.length === 1) return address[0]!;
  const v6 = address.every((a) => a.startsWith('['));
  const v4 = address.every((a) => /^\d+\.\d+\.\d+\.\d+:\d+$/.test(a));
  if (!v4 && !v6) throw new RangeError('several inference addresses must all be IP:port; use one dns:///name:port for host names');
  return `${v6 ? 'ipv6' : 'ipv4'}:${address.join(',')}`;
}

/**
 * Least outstanding requests (or round-robin) over every resolved server, and transparent
 * retries of UNAVAILABLE (a server that went away or is draining) on another one: inference is
 * idempotent, and the retries stay within the call's deadline.
 */
export type Balancing = 'least-request' | 'least-outstanding' | 'round-robin';
const serviceConfig = (balancing: Balancing) => ({
  loadBalancingConfig: [balancing === 'round-robin' ? { round_robin: {} } : { [LEAST_REQUEST_POLICY]: { weighted: balancing === 'least-request' } }],
  methodConfig: [
    {
      name: [{ service: 'inference.GRPCInferenceService' }],
      retryPolicy: {
        maxAttempts: 4,
        initialBackoff: '0.05s',
        maxBackoff: '0.5s',
        backoffMultiplier: 2,
        // Not RESOURCE_EXHAUSTED: grpc-js also answers it for a message over the size limit,
        // which no retry fixes; a full queue is retried by infer() itself (QUEUE_FULL_ATTEMPTS).
        retryableStatusCodes: ['UNAVAILABLE'],
      },
    },
  ],
});

/**
 * Client for the inference server. Every call has a deadline; gRPC failures become ApiErrors
 * with honest statuses (503 + Retry-After when the server is down or full, 504 on deadline).
 */
export class InferenceClient {
  private readonly client: GRPCInferenceServiceClient;
  /** protobufjs's ModelInferRequest encoder: the small fields before a tensor written in place. */
  private readonly encodeRequest = modelInferRequestEncoder();
  /** Until when every server answered "queue full" (ms since the epoch). */
  private saturatedUntil = 0;
  /** The execution provider each checked model runs on, as the server reports it (bgcut servers do). */
  readonly providers = new Map<string, string>();
  /** Models whose input height and width are free (see freeSize()). */
  private readonly freeSizes = new Set<string>();

  constructor(private readonly options: InferenceClientOptions) {
    // ModelInfer sends a message whose tensor was written into it as it is (infer-request-message.ts).
    const Service = inferenceClientConstructor();
    registerLeastRequestPolicy();
    const credentials = options.tls
      ? grpc.credentials.createSsl(options.tls.ca, options.tls.key ?? null, options.tls.cert ?? null)
      : grpc.credentials.createInsecure();
    this.client = new Service(grpcTarget(options.address), credentials, {
      'grpc.max_receive_message_length': options.maxMessageBytes,
      'grpc.max_send_message_length': options.maxMessageBytes,
      'grpc.service_config': JSON.stringify(serviceConfig(options.balancing ?? 'least-request')),
      'grpc.per_rpc_retry_buffer_size': RETRY_BUFFER_BYTES,
      'grpc.retry_buffer_size': 4 * RETRY_BUFFER_BYTES,
      // Reconnect promptly once a stopped server is back, instead of grpc's default backoff of up to 2 minutes.
      'grpc.initial_reconnect_backoff_ms': 250,
      'grpc.max_reconnect_backoff_ms': 2000,
      // A 4 MiB receive window takes the mask back without stalling on HTTP/2's 64 KiB default.
      'grpc-node.flow_control_window': 4 * 1024 * 1024,
      'grpc.keepalive_time_ms': 30_000,
      'grpc.keepalive_timeout_ms': 10_000,
    });
  }

  metadata(model: string, timeoutMs: number): Promise<ModelMetadataResponse__Output> {
    return new Promise((resolve, reject) => {
      this.client.ModelMetadata(
        { name: model },
        { deadline: Date.now() + timeoutMs },
        (error, response) => (error || !response ? reject(error ?? new Error('empty response')) : resolve(response)),
      );
    });
  }

  /**
   * The profile's model as the image pipeline calls it: its input tensor in (at the size the
   * call names, else the profile's), its mask out.
   */
  maskModel(model: string, profile: PreprocessingProfile): MaskModel {
    const input = { name: profile.inputName, datatype: profile.inputDatatype ?? 'FP32' };
    const output = { name: profile.outputName, datatype: profile.outputDatatype ?? 'FP32' };
    const sized = (size?: { width: number; height: number }) => (size ? { ...profile, ...size } : profile);
    const call = async (data: ModelInput, signal: AbortSignal, size?: { width: number; height: number }) => {
      const result = await this.infer(model, { ...input, shape: inputShape(sized(size)), data }, output, signal);
      return { mask: result.data, serverRunMs: result.serverRunMs };
    };
    // The bytes of this model's request at a size, before its tensor: the tensor is then written
    // behind them, into the message itself (model-input.ts).
    const prefix = (size: { width: number; height: number }) =>
      this.requestPrefix(requestHeader(model, { ...input, shape: inputShape(sized(size)) }, output), tensorBytes(sized(size)));
    return Object.assign(call, { prefix });
  }

  /** The bytes of a ModelInfer request with `header`'s fields that go before its one raw tensor. */
  requestPrefix(header: InferRequestHeader, tensorBytes: number): Uint8Array {
    return inferRequestPrefix(this.encodeRequest, header, tensorBytes);
  }

  /**
   * True when the model's metadata (read by verifyModel) says its input's height and width are
   * free (-1): it runs at whatever size a quality mode asks for. False for fixed-size models and
   * models not verified yet.
   */
  freeSize(model: string): boolean {
    return this.freeSizes.has(model);
  }

  /**
   * Runs the model on one input and returns the named output, read from raw or typed contents
   * (Triton and KServe answer in either) and checked against its shape.
   */
  infer(
    model: string,
    input: { name: string; datatype: Datatype; shape: number[]; data: ModelInput },
    output: { name: string; datatype: Datatype },
    signal: AbortSignal,
  ): Promise<{ shape: number[]; data: MaskTensor; serverRunMs: number | undefined; bytesSent: number; bytesReceived: number }> {
    // A client span when the app traces (src/tracing/otel.ts); its context goes in the metadata.
    return traceStep(MODEL_INFER_SPAN, () => this.inferCall(model, input, output, signal), {
      kind: 'client',
      attributes: { 'rpc.system': 'grpc', 'rpc.service': INFERENCE_SERVICE_NAME, 'rpc.method': 'ModelInfer', 'bgcut.model': model },
    });
  }

  private inferCall(
    model: string,
    input: { name: string; datatype: Datatype; shape: number[]; data: ModelInput },
    output: { name: string; datatype: Datatype },
    signal: AbortSignal,
  ): Promise<{ shape: number[]; data: MaskTensor; serverRunMs: number | undefined; bytesSent: number; bytesReceived: number }> {
    // The request already ended (a `best` pass after its client left): nothing is sent.
    if (signal.aborted) return Promise.reject(abortReason(signal));
    const tensor = tensorOf(input.data);
    const header = requestHeader(model, input, output);
    let request: ModelInferRequest | EncodedInferRequest;
    if (isFramed(input.data)) {
      // Written into its message already: sent as it is, once checked that it was laid out for this call.
      const { message } = input.data;
      const prefix = this.requestPrefix(header, tensor.byteLength);
      if (message.length !== prefix.length + tensor.byteLength || !startsWithPrefix(message, prefix)) {
        return Promise.reject(new Error('the request message was laid out for another model call'));
      }
      request = new EncodedInferRequest(message);
    } else {
      // A view of the tensor, not a copy: protobufjs copies it into the message.
      request = { ...header, rawInputContents: [Buffer.from(tensor.buffer, tensor.byteOffset, tensor.byteLength)] };
    }
    const bytesSent = tensor.byteLength;
    const deadline = Date.now() + this.options.timeoutMs;
    type Result = Awaited<ReturnType<InferenceClient['infer']>>;
    // The model for the balancer and the trace context, taken here, inside the call's span.
    const metadata = modelMetadata(model);
    const attempt = (left: number): Promise<Result> =>
      new Promise<Result>((resolve, reject) => {
        // The client's ModelInfer serializer takes either (inferenceClientConstructor).
        const call = this.client.ModelInfer(request as ModelInferRequest, metadata.clone(), { deadline }, (error, response) => {
          signal.removeEventListener('abort', cancel);
          if (error) {
            // That server's queue is full: the balancer puts the next try on another server
            // (one that just refused loses to any other for a second: least-request-balancer.ts).
            if (isQueueFull(error) && left > 1 && !signal.aborted && Date.now() < deadline) resolve(attempt(left - 1));
            else reject(this.toApiError(error, signal));
            return;
          }
          try {
            resolve({ ...readOutput(response!, output.name, output.datatype), bytesSent });
          } catch (failure) {
            reject(new ApiError('internal_error', { detail: 'The inference server returned an unexpected output.', cause: failure }));
          }
        });
        // The HTTP client went away: cancel, so a queued inference is dropped on the server.
        const cancel = () => call.cancel();
        signal.addEventListener('abort', cancel, { once: true });
      });
    return attempt(QUEUE_FULL_ATTEMPTS);
  }

  /** Checks that the served model takes and returns what the profile expects (datatype, layout, size). */
  async verifyModel(model: string, profile: PreprocessingProfile, timeoutMs: number): Promise<void> {
    const meta = await this.metadata(model, timeoutMs);
    const input = meta.inputs.find((t) => t.name === profile.inputName);
    const output = meta.outputs.find((t) => t.name === profile.outputName);
    const fits = (shape: number[], expected: number[]) =>
      shape.length === expected.length && shape.every((d, i) => d === -1 || d === expected[i]);
    const wantIn = { datatype: profile.inputDatatype ?? 'FP32', shape: inputShape(profile) };
    const wantOut = { datatype: profile.outputDatatype ?? 'FP32', shape: maskShape(profile) };
    const problems: string[] = [];
    if (!input) problems.push(`it has no input "${profile.inputName}" (inputs: ${meta.inputs.map((t) => t.name).join(', ')})`);
    else if (input.datatype !== wantIn.datatype || !fits(input.shape.map(Number), wantIn.shape)) {
      problems.push(
        `input "${input.name}" is ${input.datatype}[${input.shape}], the profile needs ${wantIn.datatype}[${wantIn.shape}] (${profile.inputLayout ?? 'NCHW'})`,
      );
    }
    if (!output) problems.push(`it has no output "${profile.outputName}" (outputs: ${meta.outputs.map((t) => t.name).join(', ')})`);
    else if (output.datatype !== wantOut.datatype || !fits(output.shape.map(Number), wantOut.shape)) {
      problems.push(`output "${output.name}" is ${output.datatype}[${output.shape}], the profile needs ${wantOut.datatype}[${wantOut.shape}]`);
    }
    // Only bgcut's server reports its execution provider; Triton and KServe need not.
    this.providers.set(model, meta.properties?.execution_provider ?? 'unknown');
    // Height and width: where the profile's layout puts them in the input's shape.
    const hw = (profile.inputLayout ?? 'NCHW') === 'NHWC' ? [1, 2] : [2, 3];
    const inShape = input?.shape.map(Number) ?? [];
    if (hw.every((i) => inShape[i] === -1)) this.freeSizes.add(model);
    else this.freeSizes.delete(model);
    if (problems.length > 0) {
      throw new ModelMismatchError(`model "${model}" at ${this.options.address} does not fit the preprocessing profile: ${problems.join('; ')}`);
    }
  }

  /**
   * True for a moment after every server tried was full: new requests are then refused at once,
   * before their uploads are read, instead of piling up in memory only to be refused later.
   */
  saturated(): boolean {
    return Date.now() < this.saturatedUntil;
  }

  close(): void {
    this.client.close();
  }

  private toApiError(error: grpc.ServiceError, signal: AbortSignal): ApiError {
    const retryAfter = { 'retry-after': String(this.options.retryAfterSeconds) };
    switch (error.code) {
      case grpc.status.RESOURCE_EXHAUSTED:
        if (OVERSIZED_MESSAGE.test(error.details ?? '')) {
          return new ApiError('internal_error', { detail: 'The inference message is larger than the gRPC message limit of the API or of the inference server.', cause: error });
        }
        this.saturatedUntil = Date.now() + SATURATION_WINDOW_MS;
        return new ApiError('inference_unavailable', { headers: retryAfter, cause: error, detail: 'Every inference server is busy. Retry after the time in Retry-After.' });
      case grpc.status.UNAVAILABLE:
        return new ApiError('inference_unavailable', { headers: retryAfter, cause: error });
      case grpc.status.DEADLINE_EXCEEDED:
        return new ApiError('inference_timeout', { headers: retryAfter, cause: error });
      case grpc.status.CANCELLED:
        // Our own cancel (the request ended) carries the request's reason; a server that
        // cancelled the call (it is shutting down) is unavailable, and another may answer.
        if (signal.aborted) return abortReason(signal);
        return new ApiError('inference_unavailable', { headers: retryAfter, cause: error, detail: 'The inference server cancelled the call. Retry after the time in Retry-After.' });
      default:
        return new ApiError('internal_error', { detail: 'Inference failed.', cause: error });
    }
  }
}

/** A ModelInfer request's fields other than its tensor's bytes, as bgcut sends them. */
function requestHeader(model: string, input: { name: string; datatype: Datatype; shape: number[] }, output: { name: string }): InferRequestHeader {
  return {
    modelName: model,
    inputs: [{ name: input.name, datatype: input.datatype, shape: input.shape }],
    outputs: [{ name: output.name }],
  };
}

function modelMetadata(model: string): grpc.Metadata {
  const metadata = new grpc.Metadata();
  metadata.set(MODEL_METADATA_KEY, model);
  for (const [name, value] of Object.entries(traceContextHeaders())) metadata.set(name, value);
  return metadata;
}

const isQueueFull = (error: grpc.ServiceError) => error.code === grpc.status.RESOURCE_EXHAUSTED && !OVERSIZED_MESSAGE.test(error.details ?? '');

/** Why the request ended, as the pipeline put it (client_closed, upload_timeout, service_unavailable). */
function abortReason(signal: AbortSignal): ApiError {
  return signal.reason instanceof ApiError ? signal.reason : new ApiError('client_closed', { cause: signal.reason });
}

export class ModelMismatchError extends Error {
  override readonly name = 'ModelMismatchError';
}

/**
 * The named output of a ModelInfer answer as a typed array, from `raw_output_contents` or the
 * tensor's typed `contents`, after checking its datatype and that its bytes fill its shape.
 */
export function readOutput(response: ModelInferResponse__Output, name: string, datatype: Datatype) {
  const index = response.outputs.findIndex((o) => o.name === name);
  const tensor = response.outputs[index];
  if (!tensor) throw new Error(`no output ${name} in the answer`);
  if (tensor.datatype !== datatype || !isDatatype(datatype)) throw new Error(`output ${name} is ${tensor.datatype}, expected ${datatype}`);
  if (datatype !== 'FP32' && datatype !== 'UINT8' && datatype !== 'UINT16') throw new Error(`masks of type ${datatype} are not supported`);
  const shape = tensor.shape.map(Number);
  const elements = elementCount(shape);
  const raw = response.rawOutputContents.length > 0 ? response.rawOutputContents[index] : undefined;
  if (raw && typedValueCount(tensor.contents) > 0) throw new Error(`output ${name} has both raw and typed contents`);
  const bytes = raw ?? typedContentsToBytes(datatype, tensor.contents ?? ({} as never), elements);
  if (bytes.length !== elements * DATATYPE_BYTES[datatype]) throw new Error(`output ${name} has ${bytes.length} bytes for shape [${shape}]`);
  const runUs = response.parameters.session_run_us?.int64Param;
  const serverRunMs = runUs === undefined ? undefined : Number(runUs) / 1000;
  return { shape, data: typedView(datatype, bytes), serverRunMs, bytesReceived: bytes.length };
}

/** A typed view of received bytes; copied only when they do not start on the element's alignment. */
function typedView(datatype: 'FP32' | 'UINT8' | 'UINT16', bytes: Buffer): MaskTensor {
  const size = DATATYPE_BYTES[datatype];
  const aligned = bytes.byteOffset % size === 0 ? bytes : Buffer.from(bytes);
  const { buffer, byteOffset, byteLength } = aligned;
  if (datatype === 'UINT8') return new Uint8Array(buffer, byteOffset, byteLength);
  if (datatype === 'UINT16') return new Uint16Array(buffer, byteOffset, byteLength / 2);
  return new Float32Array(buffer, byteOffset, byteLength / 4);
}
