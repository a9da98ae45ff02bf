import os from 'node:os';
import type { ConnectionOptions, Queue, Worker } from 'bullmq';
import { lazyModule } from '../../util/lazy-module.js';
import { bullmqPrefix } from './bullmq-prefix.js';
import type { JobQueue, JobWork } from './queue.js';
import { BullMQDeliveryQueue } from './webhooks/bullmq-delivery-queue.js';

/** bullmq, loaded when a queue is made (lazy-module.ts). */
const bullmq = lazyModule<typeof import('bullmq')>('bullmq');

export interface BullMQQueueOptions {
  /**
   * Redis for BullMQ: its own connections (BullMQ's workers block on Redis, and need
   * `maxRetriesPerRequest: null`), so give a URL's parts, not the handler's `redis` client.
   */
  connection: ConnectionOptions;
  /** Queue name. Default `bgcut-jobs`. */
  name?: string;
  /**
   * Key prefix. Default `{bgcut}`: a hash tag, so all of a queue's keys are in one Redis Cluster
   * slot, as BullMQ needs there (a Cluster connection with an untagged prefix is refused).
   */
  prefix?: string;
  /** This instance's worker in BullMQ (a job's `processedBy`): for operators and tests. Default `<host>:<pid>`. */
  workerName?: string;
  /** Jobs this instance runs at once. Default 2. */
  concurrency?: number;
  /**
   * How long a job's lock lasts without renewal (the worker renews it every half of it while it
   * runs). A job whose instance died is taken by another after about this long. Default 30 000 ms.
   */
  lockDurationMs?: number;
  /** How often this instance looks for jobs whose lock lapsed. Default 15 000 ms. */
  stalledIntervalMs?: number;
  /** Times a job may be found stalled (its instance died) before it is failed. Default 5. */
  maxStalledCount?: number;
  onError?: (error: unknown) => void;
}

/**
 * Jobs through BullMQ on Redis: any instance with a worker takes them, and a job whose instance
 * died mid-way is found stalled (its lock lapsed) and run again by another. The runner makes a
 * second run harmless: it does only the images not finished, and their charges are named.
 */
export class BullMQQueue implements JobQueue {
  private readonly queue: Queue;
  private worker: Worker | undefined;
  private readonly prefix: string;

  constructor(private readonly options: BullMQQueueOptions) {
    this.prefix = bullmqPrefix(options.connection, options.prefix);
    this.queue = new (bullmq().Queue)(options.name ?? 'bgcut-jobs', { connection: options.connection, prefix: this.prefix });
    this.queue.on('error', (error) => options.onError?.(error));
  }

  async enqueue(jobId: string): Promise<void> {
    // The job's id is BullMQ's too: enqueuing it twice adds it once.
    await this.queue.add('job', { jobId }, { jobId, removeOnComplete: 1000, removeOnFail: 1000, attempts: 3, backoff: { type: 'exponential', delay: 5000 } });
  }

  start(work: JobWork): void {
    const controller = new AbortController();
    this.worker = new (bullmq().Worker)(
      this.options.name ?? 'bgcut-jobs',
      async (job) => work((job.data as { jobId: string }).jobId, controller.signal),
      {
        connection: this.options.connection,
        prefix: this.prefix,
        name: this.options.workerName ?? `${os.hostname()}:${process.pid}`,
        concurrency: this.options.concurrency ?? 2,
        lockDuration: this.options.lockDurationMs ?? 30_000,
        stalledInterval: this.options.stalledIntervalMs ?? 15_000,
        maxStalledCount: this.options.maxStalledCount ?? 5,
      },
    );
    this.worker.on('error', (error) => this.options.onError?.(error));
    this.abort = () => controller.abort(new Error('the API is shutting down'));
  }

  private abort: () => void = () => {};

  /**
   * A webhook delivery queue on the same Redis, prefix and lock settings (`bgcut-webhooks`): the
   * job service uses it when the jobs' queue is this one, so retries outlive their instance too.
   */
  deliveryQueue(): BullMQDeliveryQueue {
    return new BullMQDeliveryQueue({
      connection: this.options.connection,
      prefix: this.prefix,
      ...(this.options.lockDurationMs !== undefined ? { lockDurationMs: this.options.lockDurationMs } : {}),
      ...(this.options.stalledIntervalMs !== undefined ? { stalledIntervalMs: this.options.stalledIntervalMs } : {}),
      ...(this.options.onError ? { onError: this.options.onError } : {}),
    });
  }

  async close(graceMs = 30_000): Promise<void> {
    const timer = setTimeout(this.abort, graceMs);
    await this.worker?.close();
    clearTimeout(timer);
    await this.queue.close();
  }
}
