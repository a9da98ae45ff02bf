import * as grpc from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import os from 'node:os';
import {
  DATATYPE_BYTES,
  INFERENCE_SERVICE_NAME,
  isDatatype,
  loadInferenceProto,
  type GRPCInferenceServiceHandlers,
  type ModelInferRequest__Output,
  type ModelInferResponse,
} from '../protocol/index.js';
import { fileDigest, resolveModelFile } from './model-source.js';
import { JobAbortedError, QueueFullError, SessionPool, type ModelSignature } from './session-pool.js';
import type { TensorData, TensorSpec } from './worker-protocol.js';

export interface InferenceServerOptions {
  /** Interface to bind. Default `127.0.0.1`; `0.0.0.0` to serve other hosts. */
  host?: string;
  /** Port to bind; 0 picks a free one. Default 50051. */
  port?: number;
  /** A built-in model (`isnet-fp16`, `isnet-quint8`) or the path of an ONNX file. Default `isnet-fp16`. */
  model?: string;
  /** The name clients ask for in ModelInfer/ModelMetadata. Default `isnet`. */
  modelName?: string;
  /** Worker threads, each with its own session. Default 1. */
  workers?: number;
  /** Intra-op threads per session. Default: the machine's cores divided by `workers`. */
  intraOpThreads?: number;
  /** Calls that may wait for a free worker before RESOURCE_EXHAUSTED. Default 4 per worker. */
  maxQueue?: number;
  /** Largest gRPC message received or sent, in bytes. Default 64 MiB (a 1024x1024 FP32 RGB tensor is 12 MiB). */
  maxMessageBytes?: number;
  /** How long shutdown waits for calls in flight before it cuts them off. Default 30 s. */
  shutdownGraceMs?: number;
  /** Log lines go here. Default console.log. */
  log?: (line: string) => void;
}

export interface RunningInferenceServer {
  port: number;
  modelName: string;
  signature: ModelSignature;
  /** Stops serving: NOT_SERVING, refuse new calls, finish in-flight ones, then close. */
  shutdown(): Promise<void>;
}

const SERVER_NAME = 'bgcut-inference-server';
const SERVER_VERSION = '0.1.0';

export function resolveServerOptions(options: InferenceServerOptions) {
  const workers = options.workers ?? 1;
  const cores = os.availableParallelism();
  const resolved = {
    host: options.host ?? '127.0.0.1',
    port: options.port ?? 50051,
    model: options.model ?? 'isnet-fp16',
    modelName: options.modelName ?? 'isnet',
    workers,
    intraOpThreads: options.intraOpThreads ?? Math.max(1, Math.floor(cores / workers)),
    maxQueue: options.maxQueue ?? 4 * workers,
    maxMessageBytes: options.maxMessageBytes ?? 64 * 1024 * 1024,
    shutdownGraceMs: options.shutdownGraceMs ?? 30_000,
    log: options.log ?? ((line: string) => console.log(line)),
  };
  const positiveInts = ['workers', 'intraOpThreads', 'maxMessageBytes'] as const;
  for (const key of positiveInts) {
    if (!Number.isInteger(resolved[key]) || resolved[key] < 1) throw new RangeError(`${key} must be a positive integer`);
  }
  if (!Number.isInteger(resolved.maxQueue) || resolved.maxQueue < 0) throw new RangeError('maxQueue must be an integer >= 0');
  if (!Number.isInteger(resolved.port) || resolved.port < 0 || resolved.port > 65535) throw new RangeError('port must be 0..65535');
  if (!/^[A-Za-z0-9_.-]{1,64}$/.test(resolved.modelName)) throw new RangeError('modelName must be 1-64 of [A-Za-z0-9_.-]');
  return resolved;
}

function grpcError(code: grpc.status, details: string): Partial<grpc.ServiceError> {
  return { code, details, message: details };
}

/**
 * Starts an Open Inference Protocol (KServe v2) gRPC server for one ONNX model, plus the
 * standard grpc.health.v1 service. Health reports NOT_SERVING until every session has loaded
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

  const server = new grpc.Server({
    'grpc.max_receive_message_length': config.maxMessageBytes,
    'grpc.max_send_message_length': config.maxMessageBytes,
  });
  health.addToServer(server);

  let pool: SessionPool | undefined;
  let signature: ModelSignature | undefined;
  let version = '';
  let shuttingDown = false;
  const ready = () => Boolean(pool && signature) && !shuttingDown;

  const knownModel = (name: string, requestedVersion: string) =>
    name === config.modelName && (requestedVersion === '' || requestedVersion === version);

  const handlers: GRPCInferenceServiceHandlers = {
    ServerLive(_call, callback) {
      callback(null, { live: true });
    },
    ServerReady(_call, callback) {
      callback(null, { ready: ready() });
    },
    ServerMetadata(_call, callback) {
      callback(null, { name: SERVER_NAME, version: SERVER_VERSION, extensions: [] });
    },
    ModelReady(call, callback) {
      if (!knownModel(call.request.name, call.request.version)) {
        callback(grpcError(grpc.status.NOT_FOUND, `unknown model ${call.request.name}`));
        return;
      }
      callback(null, { ready: ready() });
    },
    ModelMetadata(call, callback) {
      if (!knownModel(call.request.name, call.request.version)) {
        callback(grpcError(grpc.status.NOT_FOUND, `unknown model ${call.request.name}`));
        return;
      }
      if (!signature) {
        callback(grpcError(grpc.status.UNAVAILABLE, 'model is loading'));
        return;
      }
      callback(null, {
        name: config.modelName,
        versions: [version],
        platform: 'onnxruntime_onnx',
        inputs: signature.inputs,
        outputs: signature.outputs,
      });
    },
    ModelInfer(call, callback) {
      const request = call.request;
      if (!knownModel(request.modelName, request.modelVersion)) {
        callback(grpcError(grpc.status.NOT_FOUND, `unknown model ${request.modelName}`));
        return;
      }
      if (!pool || !signature || shuttingDown) {
        callback(grpcError(grpc.status.UNAVAILABLE, shuttingDown ? 'server is shutting down' : 'model is loading'));
        return;
      }
      let inputs: TensorData[];
      let outputNames: string[];
      try {
        inputs = decodeInputs(request, signature.inputs);
        outputNames = request.outputs.length > 0 ? request.outputs.map((o) => o.name) : signature.outputs.map((o) => o.name);
        for (const name of outputNames) {
          if (!signature.outputs.some((o) => o.name === name)) throw new Error(`unknown output ${name}`);
        }
      } catch (error) {
        callback(grpcError(grpc.status.INVALID_ARGUMENT, (error as Error).message));
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
          callback(grpcError(grpc.status.DEADLINE_EXCEEDED, 'deadline passed before inference started'));
          return;
        }
        deadlineTimer = setTimeout(() => abort.abort(), remaining);
      }
      if (call.cancelled) {
        callback(grpcError(grpc.status.CANCELLED, 'cancelled before inference started'));
        return;
      }

      pool.run(inputs, outputNames, abort.signal).then(
        (result) => {
          clearTimeout(deadlineTimer);
          const response: ModelInferResponse = {
            modelName: config.modelName,
            modelVersion: version,
            id: request.id,
            // Time inside session.run alone, so callers can tell transfer and queueing from compute.
            parameters: { session_run_us: { int64Param: Math.round(result.runMs * 1000) } },
            outputs: result.outputs.map((o) => ({ name: o.name, datatype: o.datatype, shape: o.shape })),
            rawOutputContents: result.outputs.map((o) => Buffer.from(o.data)),
          };
          callback(null, response);
        },
        (error: Error) => {
          clearTimeout(deadlineTimer);
          if (error instanceof QueueFullError) callback(grpcError(grpc.status.RESOURCE_EXHAUSTED, error.message));
          else if (error instanceof JobAbortedError) {
            const expired = Number.isFinite(deadlineMs) && Date.now() >= deadlineMs;
            callback(grpcError(expired ? grpc.status.DEADLINE_EXCEEDED : grpc.status.CANCELLED, error.message));
          } else {
            log(`inference failed: ${error.message}`);
            callback(grpcError(grpc.status.INTERNAL, 'inference failed'));
          }
        },
      );
    },
  };

  server.addService(loadInferenceProto().inference.GRPCInferenceService.service, handlers);
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${config.host}:${config.port}`, grpc.ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    );
  });
  log(`inference server listening on ${config.host}:${port} (health NOT_SERVING while the model loads)`);

  try {
    const modelFile = await resolveModelFile(config.model);
    version = (await fileDigest(modelFile)).slice(0, 12);
    const startedPool = new SessionPool({
      modelFile,
      workers: config.workers,
      intraOpThreads: config.intraOpThreads,
      maxQueue: config.maxQueue,
    });
    const loaded = Date.now();
    const startedSignature = await startedPool.start();
    await warmUp(startedPool, startedSignature, config.workers);
    pool = startedPool;
    signature = startedSignature;
    log(
      `model ${config.modelName} (${config.model}, version ${version}) ready in ${Date.now() - loaded} ms: ` +
        `${config.workers} worker(s) x ${config.intraOpThreads} thread(s), provider cpu, queue ${config.maxQueue}`,
    );
    setHealth('SERVING');
  } catch (error) {
    server.forceShutdown();
    throw error;
  }

  return {
    port,
    modelName: config.modelName,
    signature: signature!,
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
      await pool?.close();
    },
  };
}

/** Runs each worker once on zeros, so the first real call does not pay for lazy initialisation. */
async function warmUp(pool: SessionPool, signature: ModelSignature, workers: number): Promise<void> {
  const inputs = () =>
    signature.inputs.map((spec) => {
      const shape = spec.shape.map((d) => (d > 0 ? d : 1));
      const bytes = shape.reduce((a, b) => a * b, 1) * DATATYPE_BYTES[spec.datatype];
      return { name: spec.name, datatype: spec.datatype, shape, data: new ArrayBuffer(bytes) };
    });
  const outputNames = signature.outputs.slice(0, 1).map((o) => o.name);
  await Promise.all(Array.from({ length: workers }, () => pool.run(inputs(), outputNames)));
}

/** Checks each input against the model's signature and copies its raw bytes into a transferable buffer. */
function decodeInputs(request: ModelInferRequest__Output, specs: TensorSpec[]): TensorData[] {
  if (request.inputs.length !== specs.length) {
    throw new Error(`model takes ${specs.length} input(s), got ${request.inputs.length}`);
  }
  if (request.rawInputContents.length !== request.inputs.length) {
    throw new Error('inputs must be sent in raw_input_contents, one entry per input');
  }
  return request.inputs.map((input, index) => {
    const spec = specs.find((s) => s.name === input.name);
    if (!spec) throw new Error(`unknown input ${input.name}`);
    if (!isDatatype(input.datatype) || input.datatype !== spec.datatype) {
      throw new Error(`input ${input.name} must be ${spec.datatype}, got ${input.datatype}`);
    }
    const shape = input.shape.map(Number);
    if (shape.length !== spec.shape.length || shape.some((d, i) => d < 1 || (spec.shape[i]! > 0 && d !== spec.shape[i]))) {
      throw new Error(`input ${input.name} must have shape [${spec.shape}], got [${shape}]`);
    }
    const raw = request.rawInputContents[index]!;
    const expected = shape.reduce((a, b) => a * b, 1) * DATATYPE_BYTES[spec.datatype];
    if (raw.length !== expected) throw new Error(`input ${input.name} needs ${expected} bytes, got ${raw.length}`);
    const data = new ArrayBuffer(raw.length);
    new Uint8Array(data).set(raw);
    return { name: input.name, datatype: spec.datatype, shape, data };
  });
}
