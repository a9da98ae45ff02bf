import os from 'node:os';
import path from 'node:path';
import type { JobStore } from './job-store.js';
import type { JobQueue } from './queue.js';
import type { ResultsStore } from './results-store.js';
import type { DeliveryLog } from './webhooks/deliveries.js';
import type { DeliveryQueue } from './webhooks/delivery-queue.js';
import type { WebhookSecretStore } from './webhooks/secrets.js';

/** Asynchronous batch jobs (`/v1/jobs`); see docs/jobs.md. */
export interface JobsOptions {
  /** Serve `/v1/jobs`. Default true. */
  enabled?: boolean;
  /**
   * Where accepted jobs wait for an instance to run them. Default: this process
   * (`InProcessQueue`); with several instances, `new BullMQQueue({ connection })` (Redis).
   */
  queue?: JobQueue;
  /** Jobs' records. Default: Redis when the handler has `redis`, else memory. */
  store?: JobStore;
  /** Inputs and results. Default: `LocalResultsStore` in `resultsDir`; for many instances `S3ResultsStore`. */
  results?: ResultsStore;
  /** Folder of the default results store. Default `<tmpdir>/bgcut-jobs`. */
  resultsDir?: string;
  /** Jobs this instance runs at once with the default queue. Default 2. */
  concurrency?: number;
  /** Images of one job run at once. Default 2. */
  imageConcurrency?: number;
  /** All files of one job together, in bytes (they are held in memory while the job is accepted). Default 100 MiB. */
  maxBatchBytes?: number;
  /** How often expired results are removed, in ms. Default 10 min. */
  sweepIntervalMs?: number;
  /** Webhooks (`callback_url`): without `secrets`, a job asking for a callback is refused. */
  webhooks?: {
    secrets: WebhookSecretStore;
    /** Default: Redis when the handler has `redis`, else memory. */
    deliveries?: DeliveryLog;
    /** Waits before the 2nd, 3rd... attempt, in ms. Default 5 s, 30 s, 2 min, 10 min, 1 h. */
    retryDelaysMs?: number[];
    /** Longest one attempt may take, in ms. Default 10 000. */
    timeoutMs?: number;
    /**
     * Where deliveries wait between attempts. Default: with a `BullMQQueue` for the jobs, a BullMQ
     * queue on the same Redis (`bgcut-webhooks`: retries outlive their instance); else this process.
     */
    queue?: DeliveryQueue;
  };
  /** Waits between tries of an image that failed for a passing reason (inference busy), in ms by try. */
  retryDelayMs?: (attempt: number) => number;
}

export function resolveJobsOptions(options: JobsOptions = {}) {
  const resolved = {
    enabled: options.enabled ?? true,
    queue: options.queue,
    store: options.store,
    results: options.results,
    resultsDir: options.resultsDir ?? path.join(os.tmpdir(), 'bgcut-jobs'),
    concurrency: options.concurrency ?? 2,
    imageConcurrency: options.imageConcurrency ?? 2,
    maxBatchBytes: options.maxBatchBytes ?? 100 * 1024 * 1024,
    sweepIntervalMs: options.sweepIntervalMs ?? 600_000,
    webhooks: options.webhooks,
    retryDelayMs: options.retryDelayMs,
  };
  for (const name of ['concurrency', 'imageConcurrency', 'maxBatchBytes', 'sweepIntervalMs'] as const) {
    const value = resolved[name];
    if (!Number.isInteger(value) || value <= 0) throw new RangeError(`jobs.${name} must be a positive integer, got ${value}`);
  }
  const delays = resolved.webhooks?.retryDelaysMs;
  if (delays && (delays.length > 20 || delays.some((d) => !Number.isFinite(d) || d < 0))) throw new RangeError('jobs.webhooks.retryDelaysMs must be at most 20 waits of >= 0 ms');
  return resolved;
}
