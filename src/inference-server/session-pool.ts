import { Worker } from 'node:worker_threads';
import { batchKey, splitOutputs, stackInputs } from './batching.js';
import type { RunJob, TensorData, TensorSpec, WorkerInit, WorkerReply } from './worker-protocol.js';

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

interface PendingJob {
  inputs: TensorData[];
  outputNames: string[];
  signal: AbortSignal | undefined;
  resolve: (result: RunResult) => void;
  reject: (error: Error) => void;
}

interface Slot {
  worker: Worker;
  busy: { id: number; job: PendingJob } | undefined;
}

const WORKER_URL = new URL('./session-worker.js', import.meta.url);

/**
 * A fixed set of worker threads, each with its own onnxruntime session, behind a bounded FIFO
 * queue. A job whose signal has aborted while it waited is dropped before it reaches a worker,
 * so no inference starts for a call that is already cancelled or past its deadline.
 */
export class SessionPool {
  private readonly slots: Slot[] = [];
  private readonly queue: PendingJob[] = [];
  private nextId = 1;
  private closed = false;
  private signature: ModelSignature | undefined;
  /**
   * Jobs handed to a worker, jobs dropped unrun because they were cancelled while queued, and the
   * session runs that served them (fewer than `started` when calls were batched).
   */
  readonly stats = { started: 0, dropped: 0, runs: 0 };

  constructor(private readonly options: SessionPoolOptions) {}

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

  run(inputs: TensorData[], outputNames: string[], signal?: AbortSignal): Promise<RunResult> {
    if (this.closed) return Promise.reject(new JobAbortedError('the session pool is closed'));
    if (signal?.aborted) return Promise.reject(new JobAbortedError('cancelled before it was queued'));
    const idle = this.slots.find((s) => !s.busy);
    if (!idle && this.queue.length >= this.options.maxQueue) {
      return Promise.reject(new QueueFullError(`all ${this.slots.length} workers busy and ${this.queue.length} jobs queued`));
    }
    return new Promise<RunResult>((resolve, reject) => {
      const job: PendingJob = { inputs, outputNames, signal, resolve, reject };
      if (idle) this.dispatch(idle, job);
      else {
        this.queue.push(job);
        signal?.addEventListener('abort', () => this.dropQueued(job), { once: true });
      }
    });
  }

  /** Stops taking jobs, lets running ones finish, then ends the workers. */
  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.queue.splice(0)) job.reject(new JobAbortedError('the session pool is closing'));
    await Promise.all(
      this.slots.map(async (slot) => {
        while (slot.busy) await new Promise((r) => setTimeout(r, 20));
        await slot.worker.terminate();
      }),
    );
  }

  private spawn(): Promise<ModelSignature> {
    const init: WorkerInit = { modelFile: this.options.modelFile, intraOpThreads: this.options.intraOpThreads, providers: this.options.providers };
    const worker = new Worker(WORKER_URL, { workerData: init });
    const slot: Slot = { worker, busy: undefined };
    return new Promise<ModelSignature>((resolve, reject) => {
      let ready = false;
      worker.on('message', (reply: WorkerReply) => {
        switch (reply.type) {
          case 'ready':
            ready = true;
            this.slots.push(slot);
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
            if (reply.type === 'result') busy.job.resolve({ outputs: reply.outputs, runMs: reply.runMs, batchSize: 1 });
            else busy.job.reject(new Error(reply.message));
            this.pump(slot);
            break;
          }
        }
      });
      worker.on('error', (error) => {
        if (!ready) reject(error);
      });
      worker.on('exit', (code) => {
        const index = this.slots.indexOf(slot);
        if (index >= 0) this.slots.splice(index, 1);
        slot.busy?.job.reject(new Error(`inference worker exited with code ${code}`));
        slot.busy = undefined;
        // A worker that dies while serving (out of memory, native crash) is replaced, so the
        // pool keeps its size; one that fails to load stays down and start() reports it.
        if (ready && !this.closed) {
          this.spawn().catch((error: unknown) => console.error('inference worker restart failed:', error));
        }
      });
    });
  }

  private dispatch(slot: Slot, job: PendingJob): void {
    const id = this.nextId++;
    slot.busy = { id, job };
    this.stats.started++;
    this.stats.runs++;
    const message: RunJob = { type: 'run', id, inputs: job.inputs, outputNames: job.outputNames };
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
      const batch = this.companions(job);
      if (batch.length === 1) this.dispatch(slot, job);
      else this.dispatchBatch(slot, batch);
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
      if (!next.signal?.aborted && total + images(next) <= maxBatch && batchKey(next.inputs, next.outputNames) === key) {
        this.queue.splice(i, 1);
        batch.push(next);
        total += images(next);
      } else i++;
    }
    return batch;
  }

  /** One session.run over the batch's stacked images; each call gets its own rows back. */
  private dispatchBatch(slot: Slot, batch: PendingJob[]): void {
    const sizes = batch.map((j) => j.inputs[0]!.shape[0]!);
    const images = sizes.reduce((a, b) => a + b, 0);
    const merged: PendingJob = {
      inputs: stackInputs(batch.map((j) => j.inputs)),
      outputNames: batch[0]!.outputNames,
      signal: undefined,
      resolve: (result) => {
        let parts: TensorData[][];
        try {
          parts = splitOutputs(result.outputs, sizes);
        } catch (error) {
          for (const j of batch) j.reject(error as Error);
          return;
        }
        batch.forEach((j, i) => j.resolve({ outputs: parts[i]!, runMs: result.runMs, batchSize: images }));
      },
      reject: (error) => {
        for (const j of batch) j.reject(error);
      },
    };
    this.stats.started += batch.length - 1;
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
