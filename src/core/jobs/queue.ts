/** Runs one job to its end (or as far as it can go); rejecting hands it to the queue's retry. */
export type JobWork = (jobId: string, signal: AbortSignal) => Promise<void>;

/**
 * Hands accepted jobs to whichever instance has room: InProcessQueue (this process only, the
 * default) or BullMQQueue (Redis: any instance takes work, and a job whose instance died is
 * picked up by another). A queue delivers each job at least once; the runner makes running one
 * again harmless (images already done are skipped, charges are named by image).
 */
export interface JobQueue {
  enqueue(jobId: string): Promise<void>;
  /** Starts taking jobs, running at most the queue's concurrency at once. */
  start(work: JobWork): void;
  /** Stops taking jobs; jobs running are aborted after `graceMs` and left for another instance (or a restart). */
  close(graceMs?: number): Promise<void>;
}

export interface InProcessQueueOptions {
  /** Jobs run at once. Default 2. */
  concurrency?: number;
  /** Told of a job whose work rejected (it is not retried: there is no other instance to retry it). */
  onError?: (jobId: string, error: unknown) => void;
}

/** First in, first out, in this process: a job accepted here is lost if this process ends. */
export class InProcessQueue implements JobQueue {
  private readonly waiting: string[] = [];
  private readonly running = new Map<string, Promise<void>>();
  private readonly controller = new AbortController();
  private work: JobWork | undefined;
  private closed = false;
  private readonly concurrency: number;

  constructor(private readonly options: InProcessQueueOptions = {}) {
    this.concurrency = options.concurrency ?? 2;
    if (!Number.isInteger(this.concurrency) || this.concurrency < 1) throw new RangeError('jobs concurrency must be a positive integer');
  }

  async enqueue(jobId: string): Promise<void> {
    if (this.closed) throw new Error('the job queue is closed');
    this.waiting.push(jobId);
    this.pump();
  }

  start(work: JobWork): void {
    this.work = work;
    this.pump();
  }

  async close(graceMs = 30_000): Promise<void> {
    this.closed = true;
    const all = Promise.allSettled(this.running.values());
    const timer = setTimeout(() => this.controller.abort(new Error('the API is shutting down')), graceMs);
    await all;
    clearTimeout(timer);
  }

  /** Jobs waiting and running (for tests and metrics). */
  get size(): number {
    return this.waiting.length + this.running.size;
  }

  private pump(): void {
    while (this.work && !this.closed && this.running.size < this.concurrency && this.waiting.length > 0) {
      const jobId = this.waiting.shift()!;
      const run = this.work(jobId, this.controller.signal)
        .catch((error: unknown) => this.options.onError?.(jobId, error))
        .finally(() => {
          this.running.delete(jobId);
          this.pump();
        });
      this.running.set(jobId, run);
    }
  }
}
