/**
 * The inference thread, seen from the host's main thread: one worker thread
 * (inference-thread-worker.ts) that owns a gRPC channel of its own and makes every ModelInfer
 * call on it. Why a thread: a call's message is 3 MiB or more (the tensor), which grpc-js copies
 * into its frame and writes over HTTP/2, and the mask comes back through its decoder; on the main
 * thread that is CPU per request on the host's event loop, and 4+ MiB of external memory per
 * request that makes V8 collect the main heap in full, again on the event loop. Here the main
 * thread posts a task (a few fields and the message, written by a pixel-pool worker and moved
 * on to the thread, see infer()) and gets the mask back in shared memory.
 *
 * One thread: its work per call is a copy of the message into grpc-js's frame, HTTP/2 writes and
 * reads, and a copy of the mask: under 10 ms of CPU per 3 MiB call even on a loaded 2-core box
 * (bench/inference-thread-cpu.ts), so one thread carries over 100 calls a second. It is started with the client, kept from holding the
 * process open while no call is under way (a host's process ends as before), started again if it
 * ever stops, and ended by close() (RemoveBgHandler.close()).
 */
import { Worker } from 'node:worker_threads';
import type { Datatype, InferRequestHeader } from '../../protocol/index.js';
import type { ChannelOptions } from './grpc-channel.js';
import { removeRingFiles, type RingCounts, type SharedMemorySettings } from './shared-memory-ring.js';

/** What the thread is started with: its channel, and whether and how it may use shared memory with the server. */
export interface ThreadOptions extends ChannelOptions {
  sharedMemory: SharedMemorySettings;
}

/** One ModelInfer call for the thread: the message as it is sent (or a header and a tensor to encode), and its deadline and metadata. */
export interface InferTask {
  type: 'infer';
  id: number;
  model: string;
  /** A message with its tensor in place (infer-request-message.ts). */
  message?: Uint8Array | undefined;
  /**
   * The request's fields: with `tensor`, encoded by protobufjs in the thread; with `message`,
   * what a call through shared memory sends instead of it (shared-memory-ring.ts).
   */
  header?: InferRequestHeader | undefined;
  tensor?: Uint8Array | undefined;
  output: { name: string; datatype: Datatype };
  /**
   * The call's time limit in ms, from when the thread gets it (its deadline is taken on the
   * thread's own clock: a host or test that fakes the main thread's Date, as test/month-turn.test.ts
   * does, must not hand the thread a deadline already past or far ahead).
   */
  timeoutMs: number;
  /** W3C trace context of the client span, made on the main thread (src/tracing/otel.ts). */
  trace: Record<string, string>;
  /** The message's memory was moved here (infer()'s `move`): the thread frees it once the call ended. */
  moved?: boolean;
}

export type ToThread = InferTask | { type: 'cancel'; id: number } | { type: 'counts'; id: number } | { type: 'close' };

/** How a call ended: the mask (in shared memory), a gRPC status, or an answer that could not be read. */
export type InferOutcome =
  | { ok: true; shape: number[]; mask: SharedArrayBuffer; serverRunMs: number | undefined; bytesReceived: number }
  | { ok: false; status: { code: number; details: string; message: string } }
  | { ok: false; unexpectedOutput: string };

/** What the thread counted (protocol/message-counts.ts), and its id. */
export interface ThreadCounts {
  threadId: number;
  counts: { encoded: number; decoded: number };
  /** Collections the thread made after its calls (inference-thread-worker.ts's collectAfterCall). */
  collections: number;
  /** Moved messages the thread freed as their calls ended. */
  released: number;
  /** Masks whose shared memory was made ready before their call (mask-memory.ts). */
  masksReady: number;
  /** Calls through shared memory with the server, and the ring's state (shared-memory-ring.ts). */
  sharedMemory: RingCounts;
}

export type FromThread = ({ type: 'infer'; id: number } & InferOutcome) | ({ type: 'counts'; id: number } & ThreadCounts);

/**
 * Each call leaves grpc-js's framed copy of its message and the answer's receive buffers dead in
 * the inference thread (and its message, when copied here rather than moved: a moved one is freed as the
 * call ends): about 4-7 MiB at 1024x1024 int8, outside a heap of a few MB, which V8 would let
 * grow by 64 MB before collecting. The thread collects once COLLECT_AFTER_BYTES of messages were
 * sent since its last collection instead (a few ms of its small heap, never the host's event
 * loop). 16 MiB until the seventh round; 8 since, measured with the message moved and freed
 * here (docs/benchmarks-history.md, "Seventh round"). A call through a shared memory slot whose moved
 * message was freed leaves nothing large dead (its message framed is a few hundred bytes) and
 * counts none: since the ninth round (docs/inference-server.md, "Ninth round").
 */
export const COLLECT_AFTER_BYTES = 8 * 1024 * 1024;

// Tests run the sources through vitest, but a worker thread runs plain Node: it loads the built
// file (`npm test` builds first), as the pixel pool does.
/** The file the thread runs (a file: URL). */
export const INFERENCE_WORKER_FILE = (
  import.meta.url.endsWith('.ts')
    ? new URL('../../../dist/src/core/inference/inference-thread-worker.js', import.meta.url)
    : new URL('./inference-thread-worker.js', import.meta.url)
).href;

/** The thread stopped (closed, or failed) before the call was answered. */
export class InferenceThreadStopped extends Error {
  override readonly name = 'InferenceThreadStopped';
}

interface Pending {
  resolve: (value: never) => void;
  reject: (error: Error) => void;
}

export class InferenceThread {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private closing: Promise<void> | undefined;
  /** Messages moved to the thread rather than copied (for tests). */
  moved = 0;

  constructor(private readonly options: ThreadOptions) {
    this.start();
    // The ring's files go with the process, however the thread ended (close() removes them first).
    if (options.sharedMemory.mode !== 'off') process.on('exit', this.removeFiles);
  }

  private readonly removeFiles = () => {
    removeRingFiles(this.options.sharedMemory.prefix);
  };

  /** The worker's thread id (for tests), or undefined while none runs. */
  get threadId(): number | undefined {
    return this.worker?.threadId;
  }

  /** Threads started so far: each names its shared memory objects apart (a thread started again after one failed must not meet its files or regions). */
  private starts = 0;

  private start(): Worker {
    // What a thread that stopped left of its ring goes first.
    if (this.starts > 0) this.removeFiles();
    const sharedMemory = { ...this.options.sharedMemory, prefix: `${this.options.sharedMemory.prefix}-${this.starts++}` };
    const worker = new Worker(new URL(INFERENCE_WORKER_FILE), { workerData: { ...this.options, sharedMemory }, name: 'bgcut-inference' });
    worker.unref();
    worker.on('message', (message: FromThread) => this.settle(message.id, (p) => p.resolve(message as never)));
    worker.on('error', (error) => this.stopped(worker, error));
    worker.on('exit', (code) => this.stopped(worker, new InferenceThreadStopped(`the inference thread exited (code ${code})`)));
    this.worker = worker;
    return worker;
  }

  private stopped(worker: Worker, error: Error): void {
    if (this.worker !== worker) return;
    this.worker = undefined;
    const failed = [...this.pending.values()];
    this.pending.clear();
    for (const p of failed) p.reject(error instanceof InferenceThreadStopped ? error : new InferenceThreadStopped(`the inference thread failed: ${error.message}`, { cause: error }));
  }

  private settle(id: number, how: (pending: Pending) => void): void {
    const pending = this.pending.get(id);
    if (!pending) return;
    this.pending.delete(id);
    if (this.pending.size === 0) this.worker?.unref();
    how(pending);
  }

  private request<T>(message: ToThread & { id: number }, transfer?: ArrayBuffer): Promise<T> {
    if (this.closing) return Promise.reject(new InferenceThreadStopped('the inference client is closed'));
    const worker = this.worker ?? this.start();
    return new Promise<T>((resolve, reject) => {
      // Held open while a call is under way, as grpc-js holds a process open during a call.
      if (this.pending.size === 0) worker.ref();
      this.pending.set(message.id, { resolve: resolve as (value: never) => void, reject });
      worker.postMessage(message, transfer ? [transfer] : undefined);
      if (transfer) this.moved++;
    });
  }

  /**
   * Makes one call in the thread. `move`: the message's memory, given up by the caller (a message
   * the pixel pool made for this call alone): moved to the thread, so nothing of it stays here
   * dead until this thread's next full collection (16 concurrent 12 MP uploads left up to 16 such
   * 3 MiB messages on the host's thread: docs/benchmarks-history.md, "Seventh round"); the caller's views
   * of it read as empty from then on. Without it the post copies the message (~0.3 ms for 3 MiB)
   * and the caller keeps a usable input. `signal` cancels the call there.
   */
  infer(task: Omit<InferTask, 'type' | 'id'>, signal: AbortSignal, move?: ArrayBuffer): Promise<InferOutcome> {
    const id = this.nextId++;
    const cancel = () => this.worker?.postMessage({ type: 'cancel', id } satisfies ToThread);
    signal.addEventListener('abort', cancel, { once: true });
    return this.request<InferOutcome>({ ...task, type: 'infer', id, moved: move !== undefined }, move).finally(() => signal.removeEventListener('abort', cancel));
  }

  /** The thread's counts of ModelInfer messages encoded and decoded (for tests). */
  counts(): Promise<ThreadCounts> {
    return this.request<ThreadCounts>({ type: 'counts', id: this.nextId++ });
  }

  /** Closes the thread's channel and ends the thread (waits at most a second for it to end on its own). */
  close(): Promise<void> {
    this.closing ??= (async () => {
      const worker = this.worker;
      if (!worker) return;
      const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
      worker.postMessage({ type: 'close' } satisfies ToThread);
      // The thread unregisters its slots (a second at most) before it ends.
      const timer = setTimeout(() => void worker.terminate(), 3000);
      await exited;
      clearTimeout(timer);
    })().finally(() => {
      this.removeFiles();
      process.off('exit', this.removeFiles);
    });
    return this.closing;
  }
}
