import { Worker } from 'node:worker_threads';
import { markLaidOut } from '../protocol/infer-response-message.js';
import { batchKey, padInputs, paddedBatchSize, splitOutputs, stackInputs } from './batching.js';
import type { RunJob, TensorData, TensorPlace, TensorSpec, WorkerInit, WorkerReply } from './worker-protocol.js';

export interface SessionPoolOptions {
  modelFile: string;
  /** Execution providers to try in order. */
  providers: string[];
  /** Worker threads, each holding its own session. */
  workers: number;
  /** Intra-op threads of each session. */
  intraOpThreads: number;
  /** Jobs that may wait for a free worker; one more is refused with QueueFullError. */
  maxQueue: number;
  /**
   * Most images one `session.run` may stack from calls that queued while the worker was busy
   * (see batching.ts). 1 (the default) runs every call alone, as a CPU should.
   */
  maxBatch?: number;
  /**
   * Delay before a crashed worker is replaced: `initialMs`, doubled for each crash in a row up to
   * `maxMs`; a worker that has completed a job resets it. Default 250 ms to 30 s.
   */
  restartBackoff?: { initialMs: number; maxMs: number };
  /** Told when the pool can serve (at least one live worker) and when it cannot. */
  onServingChange?: (serving: boolean) => void;
  /** Log lines (crashes, restarts). Default console.error. */
  log?: (line: string) => void;
  /** Told each time a job is handed to a worker (an inference starts). */
  onStart?: () => void;
  /** The worker thread's script; tests replace it to crash or hang on purpose. Default session-worker.js. */
  workerUrl?: URL;
}

export interface ModelSignature {
  inputs: TensorSpec[];
  outputs: TensorSpec[];
  /** The execution provider the sessions run on, and the ones tried before it that failed. */
  provider: string;
  skipped: { provider: string; error: string }[];
}

export interface RunResult {
  outputs: TensorData[];
  /** Time spent in session.run alone, measured in the worker (of the whole batch, when batched). */
  runMs: number;
  /** Images in the session.run that served this call (1 unless batched). */
  batchSize: number;
}

export class QueueFullError extends Error {
  override readonly name = 'QueueFullError';
}

export class JobAbortedError extends Error {
  override readonly name = 'JobAbortedError';
}

/**
 * A shared memory region the call named could not be used when its job ran (its file gone,
 * replaced or too short: FAILED_PRECONDITION; an output larger than the room given: INVALID_ARGUMENT).
 */
export class RegionRefusedError extends Error {
  override readonly name = 'RegionRefusedError';
  constructor(
    message: string,
    readonly code: 'FAILED_PRECONDITION' | 'INVALID_ARGUMENT',
  ) {
    super(message);
  }
}

/** No worker is alive (all crashed, restarts pending): the job is refused at once, not queued until its deadline. */
export class WorkersDownError extends Error {
  override readonly name = 'WorkersDownError';
}

interface PendingJob {
  inputs: TensorData[];
  outputNames: string[];
  outputPlaces?: (TensorPlace | undefined)[] | undefined;
  signal: AbortSignal | undefined;
  resolve: (result: RunResult) => void;
  reject: (error: Error) => void;
}

interface Slot {
  worker: Worker;
  busy: { id: number; job: PendingJob } | undefined;
  /** Resolves when the worker has exited. */
  exited: Promise<void>;
}

const WORKER_URL = new URL('./session-worker.js', import.meta.url);

/**
 * A fixed set of worker threads, each with its own onnxruntime session, behind a bounded FIFO
 * queue. A job whose signal has aborted while it waited is dropped before it reaches a worker,
 * so no inference starts for a call that is already cancelled or past its deadline.
 *
 * A worker that dies is replaced after a backoff that grows while replacements keep dying; while
 * no worker is alive the pool refuses jobs at once (WorkersDownError) and says it cannot serve.
 *
 * Hand-written rather than piscina: piscina replaces a crashed worker at once (no backoff), has
 * no "no live worker" state to report, and aborting a running task terminates its worker, which
 * here would mean reloading the model (seconds) for a call that could simply finish.
 */
export class SessionPool {
  private readonly slots: Slot[] = [];
  private readonly queue: PendingJob[] = [];
  private nextId = 1;
  private closed = false;
  private signature: ModelSignature | undefined;
  /** Crashes in a row since a worker last completed a job: the exponent of the restart delay. */
  private crashesInARow = 0;
  private readonly restarts = new Set<NodeJS.Timeout>();
  private serving = false;
  private readonly backoff: { initialMs: number; maxMs: number };
  private readonly log: (line: string) => void;
  /**
   * Jobs handed to a worker, jobs dropped unrun because they were cancelled while queued, and the
   * session runs that served them (fewer than `started` when calls were batched).
   */
  readonly stats = { started: 0, dropped: 0, runs: 0 };

  constructor(private readonly options: SessionPoolOptions) {
    this.backoff = options.restartBackoff ?? { initialMs: 250, maxMs: 30_000 };
    this.log = options.log ?? ((line) => console.error(line));
  }

  /** Starts every worker and resolves with the model's signature once all sessions are loaded. */
  async start(): Promise<ModelSignature> {
    const signatures = await Promise.all(Array.from({ length: this.options.workers }, () => this.spawn()));
    this.signature = signatures[0]!;
    return this.signature;
  }

  /**
   * Lets calls share a session.run, up to `maxBatch` images (set once the provider in use is
   * known), with room for `maxQueue` waiting calls so batches can fill.
   */
  enableBatching(maxBatch: number, maxQueue: number): void {
    this.options.maxBatch = maxBatch;
    this.options.maxQueue = maxQueue;
  }

  get queued(): number {
    return this.queue.length;
  }

  get running(): number {
    return this.slots.filter((s) => s.busy).length;
  }

  /** Workers alive and loaded. */
  get workers(): number {
    return this.slots.length;
  }

  /** `outputPlaces`: per output name, a shared memory region to write it into instead of the result (session-worker.ts). */
  run(inputs: TensorData[], outputNames: string[], signal?: AbortSignal, outputPlaces?: (TensorPlace | undefined)[]): Promise<RunResult> {
    if (this.closed) return Promise.reject(new JobAbortedError('the session pool is closed'));
    if (signal?.aborted) return Promise.reject(new JobAbortedError('cancelled before it was queued'));
    if (this.slots.length === 0) return Promise.reject(new WorkersDownError('no inference worker is running (restarting after a crash)'));
    const idle = this.slots.find((s) => !s.busy);
    if (!idle && this.queue.length >= this.options.maxQueue) {
      return Promise.reject(new QueueFullError(`all ${this.slots.length} workers busy and ${this.queue.length} jobs queued`));
    }
    return new Promise<RunResult>((resolve, reject) => {
      const job: PendingJob = { inputs, outputNames, outputPlaces, signal, resolve, reject };
      if (idle) {
        this.queue.unshift(job);
        this.pump(idle);
      } else {
        this.queue.push(job);
        signal?.addEventListener('abort', () => this.dropQueued(job), { once: true });
      }
    });
  }

  /**
   * Stops taking jobs, lets running ones finish for up to `graceMs`, and ends the workers. A job
   * still running after the grace is rejected (JobAbortedError) and close() resolves; its worker
   * is ended once session.run returns, since ending a thread inside onnxruntime, by terminate()
   * or by the process exiting, aborts the whole process ("terminate called after throwing an
   * instance of 'Napi::Error'", seen with isnet-fp16 on CPU): a process that ends naturally waits
   * for that run.
   */
  async close(graceMs = 10_000): Promise<void> {
    this.closed = true;
    for (const timer of this.restarts) clearTimeout(timer);
    this.restarts.clear();
    for (const job of this.queue.splice(0)) job.reject(new JobAbortedError('the session pool is closing'));
    const slots = this.slots.splice(0);
    let timer: NodeJS.Timeout | undefined;
    const graceOver = new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)));
    await Promise.race([Promise.all(slots.map((slot) => this.idle(slot))), graceOver]);
    clearTimeout(timer);
    const ended: Promise<unknown>[] = [];
    for (const slot of slots) {
      if (!slot.busy) {
        ended.push(slot.worker.terminate());
        continue;
      }
      slot.busy.job.reject(new JobAbortedError(`the session pool closed after a ${graceMs} ms grace`));
      slot.busy = undefined;
      // Not waited for, but still keeping the process alive (an exit now would abort it): ended when its run returns.
      slot.worker.once('message', () => void slot.worker.terminate());
    }
    await Promise.all(ended);
  }

  /** Resolves once the slot has no job (it finished, failed, or the worker exited). */
  private idle(slot: Slot): Promise<void> {
    if (!slot.busy) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const check = () => {
        if (slot.busy) return;
        slot.worker.off('message', check);
        resolve();
      };
      slot.worker.on('message', check);
      void slot.exited.then(resolve);
    });
  }

  private spawn(): Promise<ModelSignature> {
    const init: WorkerInit = { modelFile: this.options.modelFile, intraOpThreads: this.options.intraOpThreads, providers: this.options.providers };
    const worker = new Worker(this.options.workerUrl ?? WORKER_URL, { workerData: init });
    let exited!: () => void;
    const slot: Slot = { worker, busy: undefined, exited: new Promise<void>((resolve) => (exited = resolve)) };
    return new Promise<ModelSignature>((resolve, reject) => {
      let ready = false;
      worker.on('message', (reply: WorkerReply) => {
        switch (reply.type) {
          case 'ready':
            ready = true;
            this.slots.push(slot);
            this.setServing();
            resolve({ inputs: reply.inputs, outputs: reply.outputs, provider: reply.provider, skipped: reply.skipped });
            this.pump(slot);
            break;
          case 'fatal':
            if (!ready) reject(new Error(`model failed to load: ${reply.message}`));
            break;
          case 'result':
          case 'error': {
            const busy = slot.busy;
            if (!busy || busy.id !== reply.id) break;
            slot.busy = undefined;
            // A worker that gets through a job is healthy: the next crash starts the backoff afresh.
            this.crashesInARow = 0;
            const inMessage = reply.type === 'result' ? reply.outputs.find((o) => !o.place) : undefined;
            if (reply.type === 'result' && reply.laidOut && inMessage) markLaidOut(inMessage.data);
            if (reply.type === 'result') busy.job.resolve({ outputs: reply.outputs, runMs: reply.runMs, batchSize: 1 });
            else busy.job.reject(reply.region ? new RegionRefusedError(reply.message, reply.region) : new Error(reply.message));
            this.pump(slot);
            break;
          }
        }
      });
      worker.on('error', (error) => {
        if (!ready) reject(error);
      });
      worker.on('exit', (code) => {
        exited();
        const index = this.slots.indexOf(slot);
        if (index >= 0) this.slots.splice(index, 1);
        slot.busy?.job.reject(new Error(`inference worker exited with code ${code}`));
        slot.busy = undefined;
        if (this.closed) return;
        if (!ready && this.signature === undefined) return; // start() reports a worker that never loaded
        this.setServing();
        // No worker left: queued jobs would wait until their deadline for a restart that may
        // keep failing; they are refused now, so their callers can go to another server.
        if (this.slots.length === 0) {
          for (const job of this.queue.splice(0)) job.reject(new WorkersDownError('every inference worker crashed'));
        }
        this.scheduleRestart(ready ? `exited with code ${code}` : 'failed to load');
      });
    });
  }

  /** Replaces a dead worker after the backoff's delay; a replacement that fails schedules the next, later. */
  private scheduleRestart(why: string): void {
    const delay = Math.min(this.backoff.maxMs, this.backoff.initialMs * 2 ** this.crashesInARow);
    this.crashesInARow++;
    this.log(`inference worker ${why}; restarting in ${delay} ms (${this.slots.length} of ${this.options.workers} running)`);
    const timer = setTimeout(() => {
      this.restarts.delete(timer);
      if (this.closed) return;
      this.spawn().catch(() => {}); // its exit handler logs and schedules the next try
    }, delay);
    this.restarts.add(timer);
  }

  private setServing(): void {
    const serving = this.slots.length > 0;
    if (serving === this.serving) return;
    this.serving = serving;
    this.options.onServingChange?.(serving);
  }

  private dispatch(slot: Slot, job: PendingJob): void {
    const id = this.nextId++;
    slot.busy = { id, job };
    this.stats.started++;
    this.stats.runs++;
    this.options.onStart?.();
    const message: RunJob = { type: 'run', id, inputs: job.inputs, outputNames: job.outputNames, outputPlaces: job.outputPlaces };
    slot.worker.postMessage(
      message,
      job.inputs.map((i) => i.data),
    );
  }

  private pump(slot: Slot): void {
    while (!slot.busy && this.queue.length > 0) {
      const job = this.queue.shift()!;
      if (job.signal?.aborted) {
        this.stats.dropped++;
        job.reject(new JobAbortedError('cancelled while queued'));
        continue;
      }
      // When batching, even a lone call goes through dispatchBatch: it is padded to the one batch
      // size the session is kept at.
      if ((this.options.maxBatch ?? 1) > 1 && batchable(job)) this.dispatchBatch(slot, this.companions(job));
      else this.dispatch(slot, job);
    }
  }

  /**
   * `job` and the queued calls that can share its session.run (same inputs past the batch axis,
   * same outputs, not cancelled), oldest first, up to maxBatch images; they leave the queue.
   */
  private companions(job: PendingJob): PendingJob[] {
    const maxBatch = this.options.maxBatch ?? 1;
    const key = maxBatch > 1 ? batchKey(job.inputs, job.outputNames) : undefined;
    if (key === undefined) return [job];
    const images = (j: PendingJob) => j.inputs[0]!.shape[0]!;
    const batch = [job];
    let total = images(job);
    for (let i = 0; i < this.queue.length && total < maxBatch; ) {
      const next = this.queue[i]!;
      if (!next.signal?.aborted && total + images(next) <= maxBatch && batchable(next) && batchKey(next.inputs, next.outputNames) === key) {
        this.queue.splice(i, 1);
        batch.push(next);
        total += images(next);
      } else i++;
    }
    return batch;
  }

  /**
   * One session.run over the batch's stacked images, padded to a batch size the session has seen
   * (see paddedBatchSize); each call gets its own rows back and the padding is dropped.
   */
  private dispatchBatch(slot: Slot, batch: PendingJob[]): void {
    const sizes = batch.map((j) => j.inputs[0]!.shape[0]!);
    const images = sizes.reduce((a, b) => a + b, 0);
    const padding = paddedBatchSize(images, this.options.maxBatch ?? 1) - images;
    const merged: PendingJob = {
      inputs: padInputs(stackInputs(batch.map((j) => j.inputs)), padding),
      outputNames: batch[0]!.outputNames,
      signal: undefined,
      resolve: (result) => {
        let parts: TensorData[][];
        try {
          parts = splitOutputs(result.outputs, padding > 0 ? [...sizes, padding] : sizes);
        } catch (error) {
          for (const j of batch) j.reject(error as Error);
          return;
        }
        batch.forEach((j, i) => j.resolve({ outputs: parts[i]!, runMs: result.runMs, batchSize: images + padding }));
      },
      reject: (error) => {
        for (const j of batch) j.reject(error);
      },
    };
    this.stats.started += batch.length - 1;
    for (let i = 1; i < batch.length; i++) this.options.onStart?.();
    this.dispatch(slot, merged);
  }

  private dropQueued(job: PendingJob): void {
    const index = this.queue.indexOf(job);
    if (index < 0) return;
    this.queue.splice(index, 1);
    this.stats.dropped++;
    job.reject(new JobAbortedError('cancelled while queued'));
  }
}

/**
 * Whether a job may share a session.run: not one whose tensors lie in shared memory regions
 * (its worker reads and writes them itself; stacking would bring them through this thread).
 */
function batchable(job: PendingJob): boolean {
  return batchKey(job.inputs, job.outputNames) !== undefined && !job.inputs.some((i) => i.place) && !job.outputPlaces?.some(Boolean);
}
