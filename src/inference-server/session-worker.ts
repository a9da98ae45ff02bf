/**
 * Worker thread that owns one onnxruntime session. `session.run()` of onnxruntime-node blocks
 * the thread it runs on for the whole inference, so it runs here, leaving the gRPC server's
 * event loop free to answer health checks, metadata and new calls.
 */
import ort from 'onnxruntime-node';
import { parentPort, workerData } from 'node:worker_threads';
import { layOutOutputs } from '../protocol/infer-response-message.js';
import { readTensor, RegionUnusableError, writeTensor } from './shared-memory-io.js';
import { datatypeOf, ortTypeOf, typedArrayFor } from './tensor-types.js';
import type { RunJob, TensorData, TensorSpec, WorkerInit, WorkerReply } from './worker-protocol.js';

const port = parentPort;
if (!port) throw new Error('session-worker must run in a worker thread');
const init = workerData as WorkerInit;
/**
 * Tests and benchmarks only: every run holds its worker this many ms longer, as a slower machine
 * would (bench/balancing.ts slows one of three servers this way). Set by the CLI's
 * --test-run-delay-ms; never in production.
 */
const testRunDelayMs = Number(process.env.BGCUT_INFERENCE_TEST_RUN_DELAY_MS ?? 0);

function post(reply: WorkerReply, transfer: ArrayBuffer[] = []): void {
  port!.postMessage(reply, transfer);
}

function specsOf(metadata: readonly ort.InferenceSession.ValueMetadata[]): TensorSpec[] {
  return metadata.map((m) => {
    if (!m.isTensor) throw new Error(`model value ${m.name} is not a tensor`);
    const datatype = datatypeOf(m.type);
    if (!datatype) throw new Error(`model value ${m.name} has unsupported type ${m.type}`);
    return { name: m.name, datatype, shape: m.shape.map((d) => (typeof d === 'number' && d > 0 ? d : -1)) };
  });
}

/**
 * Opens the session on the first provider of the list that works, noting why the others did
 * not: the caller logs and reports the provider really used, never falling back in silence.
 */
async function openSession() {
  const skipped: { provider: string; error: string }[] = [];
  for (const provider of init.providers) {
    try {
      const session = await ort.InferenceSession.create(init.modelFile, {
        executionProviders: [provider],
        intraOpNumThreads: init.intraOpThreads,
        // One operator at a time: the pool gets parallelism from workers, each from its intra-op threads.
        interOpNumThreads: 1,
        executionMode: 'sequential',
        graphOptimizationLevel: 'all',
      });
      return { session, provider, skipped };
    } catch (error) {
      skipped.push({ provider, error: error instanceof Error ? error.message.split('\n')[0]! : String(error) });
    }
  }
  throw new Error(`no execution provider could load the model: ${skipped.map((s) => `${s.provider} (${s.error})`).join('; ')}`);
}

async function main(): Promise<void> {
  const { session, provider, skipped } = await openSession();
  post({ type: 'ready', inputs: specsOf(session.inputMetadata), outputs: specsOf(session.outputMetadata), provider, skipped });

  port!.on('message', (job: RunJob) => {
    void run(session, job);
  });
}

async function run(session: ort.InferenceSession, job: RunJob): Promise<void> {
  try {
    const feeds: Record<string, ort.Tensor> = {};
    for (const input of job.inputs) {
      const type = ortTypeOf(input.datatype);
      // An input in a client's shared memory region: read from there, straight into its buffer.
      const data = input.place ? readTensor(input.place) : input.data;
      const at = input.place ? {} : { byteOffset: input.byteOffset, byteLength: input.byteLength };
      feeds[input.name] = new ort.Tensor(type, typedArrayFor(type, data, at.byteOffset, at.byteLength) as never, input.shape);
    }
    const started = performance.now();
    const results = await session.run(feeds, job.outputNames);
    if (testRunDelayMs > 0) await new Promise((r) => setTimeout(r, testRunDelayMs));
    const runMs = performance.now() - started;
    const views: Uint8Array[] = [];
    const specs: Omit<TensorData, 'data'>[] = [];
    const placed: TensorData[] = [];
    for (const [index, name] of job.outputNames.entries()) {
      const tensor = results[name];
      if (!tensor) throw new Error(`model produced no output ${name}`);
      const datatype = datatypeOf(tensor.type);
      if (!datatype) throw new Error(`output ${name} has unsupported type ${tensor.type}`);
      const view = tensor.data as unknown as ArrayBufferView;
      const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
      const place = job.outputPlaces?.[index];
      if (place) {
        // Into the client's shared memory region, straight from onnxruntime's memory.
        writeTensor(place, bytes);
        placed.push({ name, datatype, shape: [...tensor.dims], data: new ArrayBuffer(0), place: { ...place, byteLength: bytes.byteLength } });
        continue;
      }
      views.push(bytes);
      specs.push({ name, datatype, shape: [...tensor.dims] });
    }
    // The tensors may view larger native buffers: their bytes are copied, once, into the answer's
    // message layout (infer-response-message.ts), one buffer for all, transferred.
    const { data, spans } = layOutOutputs(views);
    const inMessage: TensorData[] = specs.map((spec, i) => ({ ...spec, data, ...spans[i]! }));
    // In the order asked for: the answer lists every output, its bytes in the message or in a region.
    const outputs = job.outputNames.map((name) => inMessage.find((o) => o.name === name) ?? placed.find((o) => o.name === name)!);
    post({ type: 'result', id: job.id, outputs, runMs, laidOut: inMessage.length > 0 }, [data]);
  } catch (error) {
    const region = error instanceof RegionUnusableError ? error.code : undefined;
    post({ type: 'error', id: job.id, message: error instanceof Error ? error.message : String(error), ...(region ? { region } : {}) });
  }
}

main().catch((error: unknown) => {
  post({ type: 'fatal', message: error instanceof Error ? error.message : String(error) });
});
