import * as grpc from '@grpc/grpc-js';
import { randomBytes } from 'node:crypto';
import {
  INFERENCE_SERVICE_NAME,
  MODEL_INFER_SPAN,
  inferRequestPrefix,
  modelInferRequestEncoder,
  startsWithPrefix,
  TENSOR_ALIGNMENT,
  type Datatype,
  type GRPCInferenceServiceClient,
  type InferRequestHeader,
  type ModelMetadataResponse__Output,
} from '../../protocol/index.js';
import { ApiError } from '../errors.js';
import type { MaskModel } from '../image/pipeline.js';
import { inputShape, maskShape, type PreprocessingProfile } from '../image/profile.js';
import { isFramed, tensorOf, type ModelInput } from '../image/model-input.js';
import { tensorBytes, type MaskTensor } from '../image/tensor.js';
import { traceContextHeaders, traceStep } from '../../tracing/otel.js';
import { createServiceClient, OVERSIZED_MESSAGE, type Balancing, type InferenceTls } from './grpc-channel.js';
import { InferenceThread, InferenceThreadStopped, type InferTask, type ThreadCounts } from './inference-thread.js';
import { typedView } from './read-output.js';
import { isLoopbackAddress } from './shared-memory-ring.js';

export { grpcTarget, type Balancing, type InferenceTls } from './grpc-channel.js';
export { readOutput } from './read-output.js';

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
  /**
   * Tensors through shared memory (/dev/shm) instead of the message, with a server on this host
   * that offers Triton's system shared memory extension (shared-memory-ring.ts): `auto` tries it
   * when every server of `address` is on loopback (each slot registered with each), and every call goes over the wire whenever it cannot;
   * `off` (the default) never.
   */
  sharedMemory?: 'auto' | 'off';
  /** Most calls in flight through shared memory (slots, each a /dev/shm object). Default 8. */
  sharedMemorySlots?: number;
}

/** How long "all servers full" is assumed to last before requests are let through to try again. */
const SATURATION_WINDOW_MS = 1000;

/**
 * Client for the inference server. Every call has a deadline; gRPC failures become ApiErrors
 * with honest statuses (503 + Retry-After when the server is down or full, 504 on deadline).
 * ModelInfer calls are made on the inference thread (inference-thread.ts), so their messages
 * are never framed, written or read on the host's event loop; the span, the trace context, the
 * statuses and the "every server full" mark stay here.
 */
export class InferenceClient {
  /** The main thread's channel: control calls only (model metadata, for the verifier). */
  private readonly client: GRPCInferenceServiceClient;
  /** The thread that makes every ModelInfer call, on a channel of its own (inference-thread.ts). */
  private readonly thread: InferenceThread;
  /** protobufjs's ModelInferRequest encoder: the small fields before a tensor written in place. */
  private readonly encodeRequest = modelInferRequestEncoder();
  /** Until when every server answered "queue full" (ms since the epoch). */
  private saturatedUntil = 0;
  /** The execution provider each checked model runs on, as the server reports it (bgcut servers do). */
  readonly providers = new Map<string, string>();
  /** Models whose input height and width are free (see freeSize()). */
  private readonly freeSizes = new Set<string>();

  constructor(private readonly options: InferenceClientOptions) {
    const channel = { address: options.address, balancing: options.balancing, maxMessageBytes: options.maxMessageBytes, tls: options.tls };
    this.client = createServiceClient(channel);
    const mode = options.sharedMemory === 'auto' && isLoopbackAddress(options.address) && process.platform === 'linux' ? 'auto' : 'off';
    this.thread = new InferenceThread({
      ...channel,
      sharedMemory: {
        mode,
        slots: options.sharedMemorySlots ?? 8,
        prefix: `bgcut-api-${process.pid}-${randomBytes(4).toString('hex')}`,
        // Input and output of the largest message in one slot.
        maxSlotBytes: 2 * options.maxMessageBytes,
      },
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
    let request: Pick<InferTask, 'message' | 'header' | 'tensor'>;
    let move: ArrayBuffer | undefined;
    if (isFramed(input.data)) {
      // Written into its message already: sent as it is, once checked that it was laid out for this call.
      const { message } = input.data;
      const prefix = this.requestPrefix(header, tensor.byteLength);
      if (message.length !== prefix.length + tensor.byteLength || !startsWithPrefix(message, prefix)) {
        return Promise.reject(new Error('the request message was laid out for another model call'));
      }
      // The header too: a call through shared memory sends it instead of the message.
      request = { message, header };
      // A message made for this call alone is moved to the thread (no copy; nothing dead left here).
      if (input.data.sendOnce) move = movableMemory(message);
    } else {
      // Encoded by protobufjs in the thread.
      request = { header, tensor: new Uint8Array(tensor.buffer, tensor.byteOffset, tensor.byteLength) };
    }
    const bytesSent = tensor.byteLength;
    // The trace context is taken here, inside the call's span; the call itself is made, and a
    // full queue tried again on the next server, in the inference thread.
    const task = { model, ...request, output, timeoutMs: this.options.timeoutMs, trace: traceContextHeaders() };
    return this.thread.infer(task, signal, move).then(
      (outcome) => {
        if (outcome.ok) {
          const data = typedView(output.datatype as 'FP32' | 'UINT8' | 'UINT16', new Uint8Array(outcome.mask));
          return { shape: outcome.shape, data, serverRunMs: outcome.serverRunMs, bytesSent, bytesReceived: outcome.bytesReceived };
        }
        if ('unexpectedOutput' in outcome) {
          throw new ApiError('internal_error', { detail: 'The inference server returned an unexpected output.', cause: new Error(outcome.unexpectedOutput) });
        }
        throw this.toApiError(serviceError(outcome.status), signal);
      },
      (error: unknown) => {
        if (error instanceof InferenceThreadStopped) throw new ApiError('internal_error', { detail: 'Inference failed.', cause: error });
        throw error;
      },
    );
  }

  /** What the inference thread counted (protocol/message-counts.ts), and its id: for tests. */
  inferenceThreadCounts(): Promise<ThreadCounts> {
    return this.thread.counts();
  }

  /** The inference thread's id while it runs; undefined once it has ended (close()). */
  get inferenceThreadId(): number | undefined {
    return this.thread.threadId;
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

  /** Closes both channels and ends the inference thread. */
  close(): Promise<void> {
    this.client.close();
    return this.thread.close();
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

/**
 * The memory under `bytes` when it can be moved to another thread as the message alone: an
 * ordinary ArrayBuffer (not shared) that holds nothing else but the message's alignment padding
 * in front (infer-request-message.ts's allocateInferMessage).
 */
function movableMemory(bytes: Uint8Array): ArrayBuffer | undefined {
  const memory = bytes.buffer;
  if (!(memory instanceof ArrayBuffer)) return undefined;
  if (bytes.byteOffset + bytes.byteLength !== memory.byteLength || bytes.byteOffset >= TENSOR_ALIGNMENT) return undefined;
  return memory;
}

/** A status the thread posted, as the ServiceError grpc-js gives (an ApiError's cause). */
function serviceError(status: { code: number; details: string; message: string }): grpc.ServiceError {
  return Object.assign(new Error(status.message), { code: status.code, details: status.details, metadata: new grpc.Metadata() });
}

/** Why the request ended, as the pipeline put it (client_closed, upload_timeout, service_unavailable). */
function abortReason(signal: AbortSignal): ApiError {
  return signal.reason instanceof ApiError ? signal.reason : new ApiError('client_closed', { cause: signal.reason });
}

export class ModelMismatchError extends Error {
  override readonly name = 'ModelMismatchError';
}
