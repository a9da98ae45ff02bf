import type { ConnectionOptions, Queue, Worker } from 'bullmq';
import { lazyModule } from '../../../util/lazy-module.js';
import { bullmqPrefix } from '../bullmq-prefix.js';
import type { DeliveryAttemptFn, DeliveryQueue, ScheduledDelivery } from './delivery-queue.js';

/** bullmq, loaded when a queue is made (lazy-module.ts). */
const bullmq = lazyModule<typeof import('bullmq')>('bullmq');

export interface BullMQDeliveryQueueOptions {
  /** Redis for BullMQ (its own connections, `maxRetriesPerRequest: null`), as for BullMQQueue. */
  connection: ConnectionOptions;
  /** Queue name. Default `bgcut-webhooks`. */
  name?: string;
  /** Key prefix. Default `{bgcut}` (a hash tag: one Redis Cluster slot for the queue's keys). */
  prefix?: string;
  /** Deliveries this instance attempts at once. Default 8. */
  concurrency?: number;
  /** How long an attempt's lock lasts without renewal; an attempt whose instance died is made again after about this long. Default 30 000 ms. */
  lockDurationMs?: number;
  /** How often this instance looks for attempts whose lock lapsed. Default 15 000 ms. */
  stalledIntervalMs?: number;
  onError?: (error: unknown) => void;
}

/** Deliveries kept after they end, so a repeated `schedule` of the same `webhook-id` is dropped: 7 days. */
const KEEP_ENDED_SECONDS = 7 * 86_400;

/**
 * Webhook deliveries through BullMQ: each event is one BullMQ job whose id is its `webhook-id`
 * (scheduling it again adds nothing), tried `retryDelaysMs.length + 1` times with a custom
 * backoff that follows `retryDelaysMs`. The waits are BullMQ's delayed jobs, in Redis, so any
 * instance makes the next attempt; an attempt cut short by its instance's death is made again
 * by another once its lock lapses. Receivers may therefore get an event more than once, always
 * under the same `webhook-id` (Standard Webhooks: at least once; receivers drop repeats by id).
 */
export class BullMQDeliveryQueue implements DeliveryQueue {
  readonly durable = true;
  private readonly queue: Queue;
  private readonly name: string;
  private readonly prefix: string;
  private worker: Worker | undefined;
  private retries = 0;
  private readonly running = new Set<Promise<unknown>>();

  constructor(private readonly options: BullMQDeliveryQueueOptions) {
    this.name = options.name ?? 'bgcut-webhooks';
    this.prefix = bullmqPrefix(options.connection, options.prefix);
    this.queue = new (bullmq().Queue)(this.name, { connection: options.connection, prefix: this.prefix });
    this.queue.on('error', (error) => options.onError?.(error));
  }

  async schedule(item: ScheduledDelivery): Promise<void> {
    await this.queue.add('delivery', item, {
      jobId: item.delivery.id,
      attempts: this.retries + 1,
      backoff: { type: 'webhook' },
      removeOnComplete: { age: KEEP_ENDED_SECONDS },
      removeOnFail: { age: KEEP_ENDED_SECONDS },
    });
  }

  start(attempt: DeliveryAttemptFn, retryDelaysMs: number[]): void {
    this.retries = retryDelaysMs.length;
    this.worker = new (bullmq().Worker)(
      this.name,
      async (job) => {
        const item = job.data as ScheduledDelivery;
        // attemptsMade counts the attempts that failed before this one (not those cut short by a death).
        const last = job.attemptsMade >= retryDelaysMs.length;
        const run = attempt(item, last);
        this.running.add(run);
        const delivered = await run.finally(() => this.running.delete(run));
        // The record with this attempt, for the instance that makes the next one.
        await job.updateData(item);
        if (!delivered && !last) throw new Error(`webhook ${item.delivery.id} not delivered yet`);
      },
      {
        connection: this.options.connection,
        prefix: this.prefix,
        concurrency: this.options.concurrency ?? 8,
        lockDuration: this.options.lockDurationMs ?? 30_000,
        stalledInterval: this.options.stalledIntervalMs ?? 15_000,
        settings: { backoffStrategy: (attemptsMade: number) => retryDelaysMs[attemptsMade - 1] ?? retryDelaysMs.at(-1) ?? 0 },
      },
    );
    this.worker.on('error', (error) => this.options.onError?.(error));
  }

  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled(this.running);
  }

  async close(): Promise<void> {
    await this.worker?.close();
    await this.queue.close();
  }
}
