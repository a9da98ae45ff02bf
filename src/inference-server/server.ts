import * as grpc from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import type http from 'node:http';
import os from 'node:os';
import {
  DATATYPE_BYTES,
  INFERENCE_SERVICE_NAME,
  MODEL_INFER_SPAN,
  RUN_TIME_TRAILER,
  elementCount,
  isDatatype,
  typedContentsToBytes,
  typedValueCount,
  loadInferenceProto,
  inferResponseSerializer,
  type GRPCInferenceServiceHandlers,
  type ModelInferRequest__Output,
  type ModelInferResponse,
} from '../protocol/index.js';
import { traceIncoming } from '../tracing/otel.js';
import { InferenceMetrics } from './metrics.js';
import { resolveServedModel } from './families/served-model.js';
import { fileDigest } from './model-source.js';
import { batchSizes } from './batching.js';
import { markingDeserializer, movableTensor } from './received-message.js';
import { openFlowControlWindows } from './http2-windows.js';
import { JobAbortedError, QueueFullError, RegionRefusedError, SessionPool, WorkersDownError, type ModelSignature } from './session-pool.js';
import {
  RegionError,
  SHM_BYTE_SIZE_PARAMETER,
  SHM_EXTENSION,
  SHM_OFFSET_PARAMETER,
  SHM_REGION_PARAMETER,
  SharedMemoryRegions,
  type SharedMemoryOptions,
} from './shared-memory-regions.js';
import { tensorBytes, type TensorData, type TensorPlace, type TensorSpec } from './worker-protocol.js';

export interface ModelSource {
  /** The name clients ask for. */
  name: string;
  /**
   * A built-in model (`isnet`, prepared; `isnet-int8`, `isnet-fp32`, `isnet-u16`, `isnet-fp16`,
   * `isnet-quint8`), a model rembg users have, by rembg's name (`birefnet-general`, `u2net`, ...:
   * found in `$U2NET_HOME` or `~/.u2net`, checked and prepared), or the path of an ONNX file.
   */
  source: string;
  /** With a file's path: its family (`birefnet`) or a known model's name, so it is checked and prepared as one. */
  family?: string;
}

export interface ServerTls {
  /** PEM certificate chain and private key of this server. */
  cert: Buffer;
  key: Buffer;
  /** PEM of the CA whose client certificates are accepted; when set, clients must present one (mTLS). */
  clientCa?: Buffer;
}

export interface InferenceServerOptions {
  /** Interface to bind. Default `127.0.0.1`; `0.0.0.0` to serve other hosts. */
  host?: string;
  /** Port to bind; 0 picks a free one. Default 50051. */
  port?: number;
  /**
   * The models to serve. Default: DEFAULT_MODELS, the built-in prepared ISNet (8-bit in, 8-bit
   * mask out) as `isnet` and its 8-bit quantization as `isnet-int8`: the API's mode table runs
   * each pass on one of them (docs/model-int8.md).
   */
  models?: ModelSource[];
  /** Execution providers to try, in order, for every model. Default `['cpu']`. */
  providers?: string[];
  /** Worker threads per model, each with its own session. Default 1. */
  workers?: number;
  /** Intra-op threads per session. Default: the machine's cores divided by `workers`. */
  intraOpThreads?: number;
  /** Calls per model that may wait for a free worker before RESOURCE_EXHAUSTED. Default 4 per worker (at least 2 x maxBatch when batching). */
  maxQueue?: number;
  /**
   * Most images one session.run stacks from queued calls (dynamic batching; the model's batch
   * axis must be free). Every run is padded to this size, so an accelerator's session sees one
   * shape (see batching.ts). Default 1: off (measured on an H100, the server's per-call work, not
   * the GPU, was the limit; see batching.ts).
   */
  maxBatch?: number;
  /** Largest gRPC message received or sent, in bytes. Default 64 MiB (a 1024x1024 FP32 RGB tensor is 12 MiB). */
  maxMessageBytes?: number;
  /**
   * Largest value a free dimension (other than the batch) of an input may take, e.g. the height
   * and width of a model that takes any size. Bounds the model's working memory, which grows
   * with the image's area far faster than the message does. Default 2048.
   */
  maxFreeDim?: number;
  /** Connections are closed (gracefully) after this long, so clients rebalance onto new servers. Default 5 minutes. */
  maxConnectionAgeMs?: number;
  /** How long shutdown waits for calls in flight before it cuts them off. Default 30 s. */
  shutdownGraceMs?: number;
  /** TLS, or mutual TLS with `clientCa`. Default: plaintext. */
  tls?: ServerTls;
  /** Port of the Prometheus /metrics HTTP endpoint; absent for none. */
  metricsPort?: number;
  /**
   * Port of a second, plaintext gRPC listener that serves grpc.health.v1 alone, for probes that
   * cannot speak (m)TLS, such as Kubernetes' gRPC probe; absent for none. It reports what the
   * main port's health service reports.
   */
  healthPort?: number;
  /**
   * Triton's system shared memory extension (shared-memory-regions.ts): `allowClientShm: true`
   * lets clients on this host pass tensors through /dev/shm instead of the message; off by
   * default, as in Triton. Also its limits (regions, bytes per region).
   */
  sharedMemory?: SharedMemoryOptions;
  /** Log lines go here. Default console.log. */
  log?: (line: string) => void;
}

export interface RunningInferenceServer {
  port: number;
  metricsPort: number | undefined;
  healthPort: number | undefined;
  models: Record<string, ModelSignature & { version: string; sha256: string }>;
  /** Stops serving: NOT_SERVING, refuse new calls, finish in-flight ones, then close. */
  shutdown(): Promise<void>;
}

/** What a server given no models serves: ISNet, prepared, in float and in 8 bits (the mode table picks per pass). */
export const DEFAULT_MODELS: readonly ModelSource[] = [
  { name: 'isnet', source: 'isnet' },
  { name: 'isnet-int8', source: 'isnet-int8' },
];

const SERVER_NAME = 'bgcut-inference-server';
const SERVER_VERSION = '0.1.0';
/**
 * Each model is served as version "1", as Triton numbers versions; the file's SHA-256 is in the
 * metadata's properties. A client that asks for no version gets this one.
 */
const MODEL_VERSION = '1';

/** How long, at shutdown, a worker may go on with a job after the calls were cut off. */
const POOL_CLOSE_GRACE_MS = 5_000;

export function resolveServerOptions(options: InferenceServerOptions) {
  const workers = options.workers ?? 1;
  const cores = os.availableParallelism();
  const resolved = {
    host: options.host ?? '127.0.0.1',
    port: options.port ?? 50051,
    models: options.models ?? DEFAULT_MODELS,
    providers: options.providers ?? ['cpu'],
    workers,
    intraOpThreads: options.intraOpThreads ?? Math.max(1, Math.floor(cores / workers)),
    maxQueue: options.maxQueue ?? 4 * workers,
    maxQueueSet: options.maxQueue !== undefined,
    maxBatch: options.maxBatch,
    maxMessageBytes: options.maxMessageBytes ?? 64 * 1024 * 1024,
    maxFreeDim: options.maxFreeDim ?? 2048,
    maxConnectionAgeMs: options.maxConnectionAgeMs ?? 5 * 60_000,
    shutdownGraceMs: options.shutdownGraceMs ?? 30_000,
    tls: options.tls,
    metricsPort: options.metricsPort,
    healthPort: options.healthPort,
    sharedMemory: options.sharedMemory ?? {},
    log: options.log ?? ((line: string) => console.log(line)),
  };
  const positiveInts = ['workers', 'intraOpThreads', 'maxMessageBytes', 'maxFreeDim', 'maxConnectionAgeMs'] as const;
  for (const key of positiveInts) {
    if (!Number.isInteger(resolved[key]) || resolved[key] < 1) throw new RangeError(`${key} must be a positive integer`);
  }
  if (!Number.isInteger(resolved.maxQueue) || resolved.maxQueue < 0) throw new RangeError('maxQueue must be an integer >= 0');
  if (resolved.maxBatch !== undefined && (!Number.isInteger(resolved.maxBatch) || resolved.maxBatch < 1 || resolved.maxBatch > 64)) {
    throw new RangeError('maxBatch must be an integer 1..64');
  }
  if (!Number.isInteger(resolved.port) || resolved.port < 0 || resolved.port > 65535) throw new RangeError('port must be 0..65535');
  if (resolved.models.length === 0) throw new RangeError('models must name at least one model');
  for (const model of resolved.models) {
    if (!/^[A-Za-z0-9_.-]{1,64}$/.test(model.name)) throw new RangeError(`model name "${model.name}" must be 1-64 of [A-Za-z0-9_.-]`);
  }
  if (new Set(resolved.models.map((m) => m.name)).size !== resolved.models.length) throw new RangeError('model names must differ');
  if (resolved.providers.length === 0 || resolved.providers.some((p) => !/^[a-z0-9-]+$/.test(p))) {
    throw new RangeError('providers must be a list of execution provider names, e.g. cuda,cpu');
  }
  return resolved;
}

function metadataText(metadata: grpc.Metadata, key: string): string | undefined {
  const value = metadata.get(key)[0];
  return typeof value === 'string' ? value : undefined;
}

function grpcError(code: grpc.status, details: string): Partial<grpc.ServiceError> {
  return { code, details, message: details };
}

/** How many models are prepared and started at once (see the loader in startInferenceServer). */
const MODELS_LOADED_AT_ONCE = 2;

interface LoadedModel {
  name: string;
  source: string;
  sha256: string;
  pool: SessionPool;
  signature: ModelSignature;
  /** Family, licence and preparation of a family model, reported in the metadata. */
  properties: Record<string, string>;
}

/**
 * Starts an Open Inference Protocol (KServe v2) gRPC server for one or more ONNX models, plus
 * the standard grpc.health.v1 service. Health reports NOT_SERVING until every session has loaded
 * and run once (warm-up), so load balancers send no traffic to a cold server.
 */
export async function startInferenceServer(options: InferenceServerOptions = {}): Promise<RunningInferenceServer> {
  const config = resolveServerOptions(options);
  const { log } = config;
  const health = new HealthImplementation({ '': 'NOT_SERVING', [INFERENCE_SERVICE_NAME]: 'NOT_SERVING' });
  const setHealth = (status: 'SERVING' | 'NOT_SERVING') => {
    health.setStatus('', status);
    health.setStatus(INFERENCE_SERVICE_NAME, status);
  };
  const metrics = new InferenceMetrics();
  const regions = new SharedMemoryRegions(config.sharedMemory);
  /** A region call's refusal as a gRPC error. */
  const regionCall = <T>(callback: grpc.sendUnaryData<T>, peer: string, work: () => T) => {
    try {
      regions.checkCaller(peer);
      callback(null, work());
    } catch (error) {
      if (error instanceof RegionError) callback(grpcError(error.code, error.message));
      else callback(grpcError(grpc.status.INTERNAL, 'shared memory call failed'));
    }
  };

  const server = new grpc.Server({
    'grpc.max_receive_message_length': config.maxMessageBytes,
    'grpc.max_send_message_length': config.maxMessageBytes,
    'grpc.max_connection_age_ms': config.maxConnectionAgeMs,
    'grpc.max_connection_age_grace_ms': config.shutdownGraceMs,
  });
  // A request's tensor crosses in one go instead of 32 KiB per turn of this event loop (http2-windows.ts).
  const openWindows = openFlowControlWindows(server);
  health.addToServer(server);

  const models = new Map<string, LoadedModel>();
  let shuttingDown = false;
  let loaded = false;
  /** Models whose pool has no live worker (all crashed, restarts pending). */
  const down = new Set<string>();
  const ready = () => loaded && !shuttingDown && down.size === 0;
  // SERVING only while every model has a live worker: a load balancer then sends no calls to a
  // server that would refuse them all.
  const updateHealth = () => setHealth(ready() ? 'SERVING' : 'NOT_SERVING');

  const known = (name: string) => config.models.some((m) => m.name === name);
  /**
   * NOT_FOUND for a model or version this server does not have (as Triton answers: retrying will
   * not help), undefined when it does; the model itself may still be loading.
   */
  const missing = (name: string, version: string): Partial<grpc.ServiceError> | undefined => {
    if (!known(name)) return grpcError(grpc.status.NOT_FOUND, `unknown model ${name}`);
    if (version !== '' && version !== MODEL_VERSION) return grpcError(grpc.status.NOT_FOUND, `model ${name} has no version ${version} (versions: ${MODEL_VERSION})`);
    return undefined;
  };
  // Metric labels take only configured names, so clients cannot grow the label set.
  const modelLabel = (name: string) => (known(name) ? name : '_unknown');

  const handlers: GRPCInferenceServiceHandlers = {
    ServerLive(_call, callback) {
      callback(null, { live: true });
    },
    ServerReady(_call, callback) {
      callback(null, { ready: ready() });
    },
    ServerMetadata(_call, callback) {
      callback(null, { name: SERVER_NAME, version: SERVER_VERSION, extensions: regions.enabled ? [SHM_EXTENSION] : [] });
    },
    SystemSharedMemoryStatus(call, callback) {
      regionCall(callback, call.getPeer(), () => ({
        regions: Object.fromEntries(regions.status(call.request.name).map((r) => [r.name, { name: r.name, key: r.key, offset: r.offset, byteSize: r.byteSize }])),
      }));
    },
    SystemSharedMemoryRegister(call, callback) {
      regionCall(callback, call.getPeer(), () => {
        regions.register(call.request);
        log(`shared memory region ${call.request.name} registered (${call.request.key}, ${call.request.byteSize} bytes; ${regions.size} registered)`);
        return {};
      });
    },
    SystemSharedMemoryUnregister(call, callback) {
      regionCall(callback, call.getPeer(), () => {
        regions.unregister(call.request.name);
        return {};
      });
    },
    ModelReady(call, callback) {
      const notFound = missing(call.request.name, call.request.version);
      if (notFound) callback(notFound);
      else callback(null, { ready: ready() && models.has(call.request.name) });
    },
    ModelMetadata(call, callback) {
      const notFound = missing(call.request.name, call.request.version);
      if (notFound) {
        callback(notFound);
        return;
      }
      const model = models.get(call.request.name);
      if (!model) {
        callback(grpcError(grpc.status.UNAVAILABLE, 'model is loading'));
        return;
      }
      callback(null, {
        name: model.name,
        versions: [MODEL_VERSION],
        platform: 'onnxruntime_onnx',
        inputs: model.signature.inputs,
        outputs: model.signature.outputs,
        properties: { ...model.properties, execution_provider: model.signature.provider, source: model.source, sha256: model.sha256 },
      });
    },
    ModelInfer(call, callback) {
      const request = call.request;
      const model = models.get(request.modelName);
      const provider = model?.signature.provider ?? 'none';
      const answer = (error: Partial<grpc.ServiceError> | null, response?: ModelInferResponse, runMs?: number) => {
        metrics.calls.inc({ model: modelLabel(request.modelName), provider, status: error ? grpc.status[error.code!] : 'OK' });
        // The run time again as a trailer, for the client's load balancer (least-request-balancer.ts).
        const trailer = new grpc.Metadata();
        if (runMs !== undefined) trailer.set(RUN_TIME_TRAILER, String(Math.round(runMs * 1000)));
        callback(error, response, trailer);
      };
      const notFound = missing(request.modelName, request.modelVersion);
      if (notFound) {
        answer(notFound);
        return;
      }
      if (!model || shuttingDown) {
        answer(grpcError(grpc.status.UNAVAILABLE, shuttingDown ? 'server is shutting down' : 'model is loading'));
        return;
      }
      let inputs: TensorData[];
      let outputNames: string[];
      let outputPlaces: (TensorPlace | undefined)[];
      try {
        const peer = call.getPeer();
        inputs = decodeInputs(request, model.signature.inputs, config.maxFreeDim, (parameters, what) => regions.place(parameters, what, peer));
        // No outputs named: every output of the model, as the protocol says.
        outputNames = request.outputs.length > 0 ? request.outputs.map((o) => o.name) : model.signature.outputs.map((o) => o.name);
        if (new Set(outputNames).size !== outputNames.length) throw new Error('an output is named twice');
        outputPlaces = request.outputs.length > 0 ? request.outputs.map((o) => regions.place(o.parameters, `output ${o.name}`, peer)) : [];
        let responseBytes = 0;
        for (const [index, name] of outputNames.entries()) {
          const spec = model.signature.outputs.find((o) => o.name === name);
          if (!spec) throw new Error(`unknown output ${name} (outputs: ${model.signature.outputs.map((o) => o.name).join(', ')})`);
          const bytes = elementCount(outputShapeEstimate(spec.shape, model.signature.inputs[0]?.shape ?? [], inputs[0]?.shape ?? [])) * DATATYPE_BYTES[spec.datatype];
          const place = outputPlaces[index];
          // An output whose size is known before the run must fit the room its region gives.
          if (place && spec.shape.every((d) => d > 0) && bytes > place.byteLength) {
            throw new Error(`output ${name} takes ${bytes} bytes, its ${SHM_BYTE_SIZE_PARAMETER} gives ${place.byteLength}`);
          }
          if (!place) responseBytes += bytes;
        }
        // Refused before the inference runs, not after: the answer could never be sent.
        if (responseBytes > config.maxMessageBytes) {
          throw new Error(`the outputs asked for take ${responseBytes} bytes, over the ${config.maxMessageBytes}-byte message limit; name fewer outputs`);
        }
      } catch (error) {
        answer(error instanceof RegionError ? grpcError(error.code, error.message) : grpcError(grpc.status.INVALID_ARGUMENT, (error as Error).message));
        return;
      }

      // Cancelled by the client or past the caller's deadline: the job is dropped if still queued.
      const abort = new AbortController();
      call.on('cancelled', () => abort.abort());
      const deadline = call.getDeadline();
      const deadlineMs = deadline instanceof Date ? deadline.getTime() : deadline;
      let deadlineTimer: NodeJS.Timeout | undefined;
      if (Number.isFinite(deadlineMs)) {
        const remaining = deadlineMs - Date.now();
        if (remaining <= 0) {
          answer(grpcError(grpc.status.DEADLINE_EXCEEDED, 'deadline passed before inference started'));
          return;
        }
        deadlineTimer = setTimeout(() => abort.abort(), remaining);
      }
      if (call.cancelled) {
        answer(grpcError(grpc.status.CANCELLED, 'cancelled before inference started'));
        return;
      }

      // Continues the caller's trace, when it sent W3C trace context and this process traces.
      const traceHeaders = { traceparent: metadataText(call.metadata, 'traceparent'), tracestate: metadataText(call.metadata, 'tracestate') };
      const run = traceIncoming(
        MODEL_INFER_SPAN,
        traceHeaders,
        async (span) => {
          // bgcut.shared_memory: the input came from a client's region, not the message (a trace says which path a call took).
          span.setAttributes({ 'rpc.system': 'grpc', 'rpc.service': INFERENCE_SERVICE_NAME, 'rpc.method': 'ModelInfer', 'bgcut.model': model.name, 'bgcut.provider': provider, 'bgcut.shared_memory': inputs.some((input) => input.place !== undefined) });
          return model.pool.run(inputs, outputNames, abort.signal, outputPlaces.some(Boolean) ? outputPlaces : undefined);
        },
        (result, _start, end) => [{ name: 'session.run', start: end - result.runMs, end, attributes: { 'bgcut.model': model.name, 'bgcut.provider': provider } }],
      );
      metrics.queueDepth.set({ model: model.name }, model.pool.queued);
      // Calls inside session.run: the gauge was declared but never set.
      metrics.running.set({ model: model.name }, model.pool.running);
      run.then(
        (result) => {
          clearTimeout(deadlineTimer);
          metrics.queueDepth.set({ model: model.name }, model.pool.queued);
          metrics.running.set({ model: model.name }, model.pool.running);
          metrics.runSeconds.observe({ model: model.name, provider }, result.runMs / 1000);
          answer(null, {
            modelName: model.name,
            modelVersion: MODEL_VERSION,
            id: request.id,
            // Time inside session.run alone, so callers can tell transfer and queueing from compute.
            // batch_size: images in that session.run (calls queued together share one on accelerators).
            parameters: { session_run_us: { int64Param: Math.round(result.runMs * 1000) }, batch_size: { int64Param: result.batchSize } },
            // An output written into a region has no contents here; its parameters say where it is and how long.
            outputs: result.outputs.map((o) => ({ name: o.name, datatype: o.datatype, shape: o.shape, ...(o.place ? { parameters: placeParameters(request, o.name, o.place.byteLength) } : {}) })),
            // Views of the worker's message layout (infer-response-message.ts), not copies; an empty
            // entry for an output in a region, as Triton answers (one entry per output).
            rawOutputContents: result.outputs.map((o) => {
              if (o.place) return Buffer.alloc(0);
              const bytes = tensorBytes(o);
              return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
            }),
          }, result.runMs);
        },
        (error: Error) => {
          clearTimeout(deadlineTimer);
          metrics.queueDepth.set({ model: model.name }, model.pool.queued);
          metrics.running.set({ model: model.name }, model.pool.running);
          if (error instanceof QueueFullError) answer(grpcError(grpc.status.RESOURCE_EXHAUSTED, error.message));
          else if (error instanceof WorkersDownError) answer(grpcError(grpc.status.UNAVAILABLE, error.message));
          else if (error instanceof RegionRefusedError) answer(grpcError(grpc.status[error.code], error.message));
          else if (error instanceof JobAbortedError) {
            const expired = Number.isFinite(deadlineMs) && Date.now() >= deadlineMs;
            answer(grpcError(expired ? grpc.status.DEADLINE_EXCEEDED : grpc.status.CANCELLED, error.message));
          } else {
            log(`inference failed (${model.name}): ${error.message}`);
            answer(grpcError(grpc.status.INTERNAL, 'inference failed'));
          }
        },
      );
    },
  };

  const Service = loadInferenceProto().inference.GRPCInferenceService.service;
  // ModelInfer's deserializer marks the received buffers a tensor may move to a worker in.
  const service = {
    ...Service,
    ModelInfer: {
      ...Service.ModelInfer,
      requestDeserialize: markingDeserializer(Service.ModelInfer.requestDeserialize),
      // Answers whose outputs the worker wrote into a message layout are sent from it (infer-response-message.ts).
      responseSerialize: inferResponseSerializer(Service.ModelInfer.responseSerialize as grpc.serialize<ModelInferResponse>),
    },
  };
  server.addService(service, handlers);
  const credentials = config.tls
    ? grpc.ServerCredentials.createSsl(config.tls.clientCa ?? null, [{ cert_chain: config.tls.cert, private_key: config.tls.key }], Boolean(config.tls.clientCa))
    : grpc.ServerCredentials.createInsecure();
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${config.host}:${config.port}`, credentials, (error, bound) => (error ? reject(error) : resolve(bound)));
  });
  if (!openWindows?.()) log(`HTTP/2 flow-control windows left at 64 KiB: this version of @grpc/grpc-js does not have the fields http2-windows.ts opens them through`);
  const security = config.tls ? (config.tls.clientCa ? 'mTLS' : 'TLS') : 'plaintext';
  log(`inference server listening on ${config.host}:${port} (${security}; health NOT_SERVING while the models load)`);

  let metricsServer: http.Server | undefined;
  let healthServer: grpc.Server | undefined;
  let healthPort: number | undefined;
  try {
    if (config.healthPort !== undefined) {
      healthServer = new grpc.Server();
      health.addToServer(healthServer);
      healthPort = await new Promise<number>((resolve, reject) => {
        healthServer!.bindAsync(`${config.host}:${config.healthPort}`, grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound)));
      });
      log(`health (grpc.health.v1 only, plaintext) on ${config.host}:${healthPort}`);
    }
    if (config.metricsPort !== undefined) {
      metricsServer = await metrics.listen(config.metricsPort, config.host);
      const address = metricsServer.address() as { port: number };
      log(`metrics on http://${config.host}:${address.port}/metrics`);
    }
    const loading = Date.now();
    // Models load MODELS_LOADED_AT_ONCE at a time: with a valid cache each is mostly the ONNX
    // Runtime session's own start and warm-up, which the cores share (docs/inference-server.md).
    const load = async (source: (typeof config.models)[number]): Promise<LoadedModel> => {
      const started = Date.now();
      const served = await resolveServedModel(source).catch((error: Error) => {
        throw new Error(`model ${source.name}: ${error.message}`);
      });
      for (const note of served.notes) log(`model ${source.name}: ${note}`);
      const modelFile = served.file;
      const sha256 = await fileDigest(modelFile);
      const fileReady = Date.now();
      const pool = new SessionPool({
        modelFile,
        providers: config.providers,
        workers: config.workers,
        intraOpThreads: config.intraOpThreads,
        maxQueue: config.maxQueue,
        log: (line) => log(`model ${source.name}: ${line}`),
        onStart: () => metrics.started.inc({ model: source.name }),
        onServingChange: (serving) => {
          if (serving) down.delete(source.name);
          else down.add(source.name);
          updateHealth();
        },
      });
      try {
        const signature = await pool.start();
        const sessionReady = Date.now();
        for (const skip of signature.skipped) log(`model ${source.name}: execution provider ${skip.provider} unavailable (${skip.error})`);
        const batchAxisFree = signature.inputs.every((input) => input.shape[0] === -1);
        const maxBatch = batchAxisFree ? (config.maxBatch ?? 1) : 1;
        const maxQueue = config.maxQueueSet ? config.maxQueue : Math.max(config.maxQueue, 2 * maxBatch);
        if (maxBatch > 1) pool.enableBatching(maxBatch, maxQueue);
        await warmUp(pool, signature, config.workers, batchSizes(maxBatch));
        log(
          `model ${source.name} (${source.source}, sha256 ${sha256.slice(0, 12)}) ready in ${Date.now() - started} ms ` +
            `(file ${fileReady - started} ms, session ${sessionReady - fileReady} ms, warm-up ${Date.now() - sessionReady} ms) on provider ${signature.provider}` +
            `${signature.skipped.length ? ` (fell back from ${signature.skipped.map((s) => s.provider).join(', ')})` : ''}: ` +
            `${config.workers} worker(s) x ${config.intraOpThreads} thread(s), queue ${maxBatch > 1 ? maxQueue : config.maxQueue}` +
            `${maxBatch > 1 ? `, batches of up to ${maxBatch}` : ''}`,
        );
        return { name: source.name, source: source.source, sha256, pool, signature, properties: served.properties };
      } catch (error) {
        await pool.close(POOL_CLOSE_GRACE_MS);
        throw error;
      }
    };
    // Two at a time: the default pair at once, while a long list of large models (BiRefNet's
    // sessions take GBs each) does not prepare them all together. No new one starts after a failure.
    const results: PromiseSettledResult<LoadedModel>[] = [];
    let next = 0;
    let failed = false;
    const loader = async () => {
      while (!failed && next < config.models.length) {
        const i = next++;
        results[i] = await load(config.models[i]!).then(
          (value) => ({ status: 'fulfilled' as const, value }),
          (reason: unknown) => {
            failed = true;
            return { status: 'rejected' as const, reason };
          },
        );
      }
    };
    await Promise.all(Array.from({ length: Math.min(MODELS_LOADED_AT_ONCE, config.models.length) }, loader));
    // In the order given (the first is the default), and every one that loaded is closed if another failed.
    for (const result of results) if (result?.status === 'fulfilled') models.set(result.value.name, result.value);
    const failure = results.find((result): result is PromiseRejectedResult => result?.status === 'rejected');
    if (failure) throw failure.reason;
    loaded = true;
    updateHealth();
    const rss = Math.round(process.memoryUsage().rss / 2 ** 20);
    log(`serving ${config.models.length} model(s) (${config.models.map((m) => m.name).join(', ')}): all ready in ${Date.now() - loading} ms, RSS ${rss} MiB`);
  } catch (error) {
    server.forceShutdown();
    healthServer?.forceShutdown();
    metricsServer?.close();
    await Promise.all([...models.values()].map((m) => m.pool.close(POOL_CLOSE_GRACE_MS)));
    throw error;
  }

  return {
    port,
    metricsPort: metricsServer ? (metricsServer.address() as { port: number }).port : undefined,
    healthPort,
    models: Object.fromEntries([...models.values()].map((m) => [m.name, { ...m.signature, version: MODEL_VERSION, sha256: m.sha256 }])),
    async shutdown() {
      if (shuttingDown) return;
      shuttingDown = true;
      setHealth('NOT_SERVING');
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          log(`shutdown grace of ${config.shutdownGraceMs} ms passed: cutting off calls in flight`);
          server.forceShutdown();
          resolve();
        }, config.shutdownGraceMs);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      });
      // NOT_SERVING stayed visible on the health port while calls drained.
      healthServer?.forceShutdown();
      metricsServer?.close();
      // Calls were cut off above; what a worker still runs gets a short grace, then the thread ends.
      await Promise.all([...models.values()].map((m) => m.pool.close(POOL_CLOSE_GRACE_MS)));
    },
  };
}

/**
 * An output's shape for the call about to run: a free batch (first dimension) is the input's
 * batch, and the other free dimensions take, in order, the values of the input's free
 * dimensions (a segmentation model's mask has its image's height and width). An estimate, for
 * refusing answers that could never be sent before running the model.
 */
export function outputShapeEstimate(output: number[], inputSpec: number[], input: number[]): number[] {
  const freeInput = inputSpec.map((d, i) => (i > 0 && d < 0 ? input[i] ?? 1 : undefined)).filter((d): d is number => d !== undefined);
  return output.map((d, i) => (d > 0 ? d : i === 0 ? (input[0] ?? 1) : (freeInput.shift() ?? 1)));
}

/**
 * Free sizes (other than the batch) warm up at this value: the size the built-in model was
 * exported at and `balanced` runs at, so the first real call finds ONNX Runtime's memory for
 * that size already set up, as with a fixed-size model.
 */
const WARM_UP_FREE_DIM = 1024;

/** Runs each worker once on zeros, so the first real call does not pay for lazy initialisation. */
/**
 * Runs every session once at each batch size it may be given (on accelerators the first run of a
 * shape is the slow one), so the first callers never pay for it.
 */
async function warmUp(pool: SessionPool, signature: ModelSignature, workers: number, batches: number[] = [1]): Promise<void> {
  for (const batch of batches) await warmUpAt(pool, signature, workers, batch);
}

async function warmUpAt(pool: SessionPool, signature: ModelSignature, workers: number, batch: number): Promise<void> {
  const inputs = () =>
    signature.inputs.map((spec) => {
      const shape = spec.shape.map((d, axis) => (d > 0 ? d : axis === 0 ? batch : WARM_UP_FREE_DIM));
      const bytes = shape.reduce((a, b) => a * b, 1) * DATATYPE_BYTES[spec.datatype];
      return { name: spec.name, datatype: spec.datatype, shape, data: new ArrayBuffer(bytes) };
    });
  const outputNames = signature.outputs.slice(0, 1).map((o) => o.name);
  await Promise.all(Array.from({ length: workers }, () => pool.run(inputs(), outputNames)));
}

/**
 * Checks each input against the model's signature and gives its bytes in a transferable
 * buffer (the received message's own, or a copy). Inputs come all in `raw_input_contents` or each in its typed `contents`, never both.
 */
function decodeInputs(
  request: ModelInferRequest__Output,
  specs: TensorSpec[],
  maxFreeDim: number,
  placeOf: (parameters: ModelInferRequest__Output['inputs'][number]['parameters'], what: string) => TensorPlace | undefined,
): TensorData[] {
  if (request.inputs.length !== specs.length) {
    throw new Error(`model takes ${specs.length} input(s) (${specs.map((s) => s.name).join(', ')}), got ${request.inputs.length}`);
  }
  // Inputs in shared memory regions take no raw_input_contents entry (as Triton's clients send
  // them: the entries are the other inputs', in order), or an empty one (one entry per input).
  const places = request.inputs.map((input) => placeOf(input.parameters, `input ${input.name}`));
  const inMessage = places.filter((p) => !p).length;
  const raw = request.rawInputContents.length > 0;
  const perInput = raw && request.rawInputContents.length === request.inputs.length && inMessage < request.inputs.length;
  if (raw && request.rawInputContents.length !== inMessage && !perInput) {
    throw new Error(`raw_input_contents has ${request.rawInputContents.length} entries for ${inMessage} input(s) not in shared memory`);
  }
  if (perInput && places.some((p, i) => p && request.rawInputContents[i]!.length > 0)) throw new Error('an input in shared memory has raw_input_contents too; send one');
  const seen = new Set<string>();
  let rawIndex = 0;
  return request.inputs.map((input, index) => {
    const spec = specs.find((s) => s.name === input.name);
    if (!spec) throw new Error(`unknown input ${input.name} (inputs: ${specs.map((s) => s.name).join(', ')})`);
    if (seen.has(input.name)) throw new Error(`input ${input.name} is sent twice`);
    seen.add(input.name);
    if (!isDatatype(input.datatype) || input.datatype !== spec.datatype) {
      throw new Error(`input ${input.name} must be ${spec.datatype}, got ${input.datatype}`);
    }
    const shape = input.shape.map(Number);
    if (shape.length !== spec.shape.length || shape.some((d, i) => d < 1 || (spec.shape[i]! > 0 && d !== spec.shape[i]))) {
      throw new Error(`input ${input.name} must have shape [${spec.shape}], got [${shape}]`);
    }
    if (shape.some((d, i) => i > 0 && spec.shape[i]! < 0 && d > maxFreeDim)) {
      throw new Error(`input ${input.name} has shape [${shape}]: its free dimensions may be at most ${maxFreeDim} (the server's maxFreeDim)`);
    }
    const elements = elementCount(shape);
    const typed = typedValueCount(input.contents);
    const expected = elements * DATATYPE_BYTES[spec.datatype];
    const place = places[index];
    if (place) {
      if (typed > 0) throw new Error(`input ${input.name} names a shared memory region and has typed contents; send one`);
      if (place.byteLength !== expected) throw new Error(`input ${input.name} needs ${expected} bytes, its ${SHM_BYTE_SIZE_PARAMETER} is ${place.byteLength}`);
      // The session worker reads it from the region (session-worker.ts).
      return { name: input.name, datatype: spec.datatype, shape, data: new ArrayBuffer(0), place };
    }
    if (raw && typed > 0) throw new Error(`input ${input.name} has both raw_input_contents and typed contents; send one`);
    if (!raw && typed === 0 && elements > 0) throw new Error(`input ${input.name} has no data (neither raw_input_contents nor contents)`);
    const bytes = raw ? request.rawInputContents[perInput ? index : rawIndex++]! : typedContentsToBytes(spec.datatype, input.contents!, elements);
    if (bytes.length !== expected) throw new Error(`input ${input.name} needs ${expected} bytes, got ${bytes.length}`);
    // Raw contents move in the received message's own buffer where they can (received-message.ts).
    const data = raw ? movableTensor(bytes, DATATYPE_BYTES[spec.datatype]) : { data: bytesToArrayBuffer(bytes), byteOffset: 0, byteLength: bytes.length };
    return { name: input.name, datatype: spec.datatype, shape, ...data };
  });
}

/** An output written into a region: its request's region and offset, and the bytes written, as its parameters. */
function placeParameters(request: ModelInferRequest__Output, name: string, written: number) {
  const asked = request.outputs.find((o) => o.name === name)?.parameters ?? {};
  return {
    [SHM_REGION_PARAMETER]: asked[SHM_REGION_PARAMETER]!,
    [SHM_OFFSET_PARAMETER]: asked[SHM_OFFSET_PARAMETER] ?? { int64Param: 0 },
    [SHM_BYTE_SIZE_PARAMETER]: { int64Param: written },
  };
}

function bytesToArrayBuffer(bytes: Uint8Array): ArrayBuffer {
  const data = new ArrayBuffer(bytes.length);
  new Uint8Array(data).set(bytes);
  return data;
}
