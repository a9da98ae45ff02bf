import type { RedisClient } from '../redis.js';
import type { CoreRequest, CoreResponse } from '../http-types.js';
import type { ResolvedImageUrlOptions } from '../image-url/options.js';
import type { JobRecord } from './job.js';
import { MemoryJobStore, type JobStore } from './job-store.js';
import { RedisJobStore } from './redis-job-store.js';
import { InProcessQueue, type JobQueue } from './queue.js';
import { BullMQQueue } from './bullmq-queue.js';
import { LocalResultsStore, type ResultsStore } from './results-store.js';
import { runJob, type JobEventType, type RunnerDeps } from './runner.js';
import { jobsRoute, type JobRoutesDeps } from './http.js';
import { resolveJobsOptions, type JobsOptions } from './options.js';
import { MemoryDeliveryLog, RedisDeliveryLog } from './webhooks/deliveries.js';
import { WebhookSender } from './webhooks/sender.js';
import type { RequestScope } from '../pipeline/request-scope.js';

export interface JobServiceDeps {
  redis: RedisClient | undefined;
  imageUrl: ResolvedImageUrlOptions & { onRefusal?: ((refusal: Error) => void) | undefined };
  maxUploadBytes: number;
  cutout: RunnerDeps['cutout'];
  routes: Omit<JobRoutesDeps, 'jobs' | 'results' | 'queue' | 'callbackPolicy' | 'secrets' | 'events' | 'maxBatchBytes' | 'now'>;
  onInternalError: (error: unknown) => void;
  now?: () => number;
}

/** The jobs feature, wired: its stores, queue, runner and webhook sender, and its route's steps. */
export interface JobService {
  route(scope: RequestScope): Promise<CoreResponse>;
  /** Resolves when the webhooks started so far are delivered or given up (tests). */
  webhooksIdle(): Promise<void>;
  close(): Promise<void>;
}

export function createJobService(options: JobsOptions | undefined, deps: JobServiceDeps): JobService {
  const config = resolveJobsOptions(options);
  const now = deps.now ?? Date.now;
  const jobs: JobStore = config.store ?? (deps.redis ? new RedisJobStore(deps.redis) : new MemoryJobStore(now));
  const results: ResultsStore = config.results ?? new LocalResultsStore(config.resultsDir);
  const queue: JobQueue = config.queue ?? new InProcessQueue({ concurrency: config.concurrency, onError: (_id, error) => deps.onInternalError(error) });
  const policy = { allowedPorts: deps.imageUrl.allowedPorts, resolver: deps.imageUrl.resolver, allowLoopbackForTesting: deps.imageUrl.allowLoopbackForTesting };
  const sender = config.webhooks
    ? new WebhookSender({
        secrets: config.webhooks.secrets,
        deliveries: config.webhooks.deliveries ?? (deps.redis ? new RedisDeliveryLog(deps.redis) : new MemoryDeliveryLog()),
        policy,
        retryDelaysMs: config.webhooks.retryDelaysMs,
        timeoutMs: config.webhooks.timeoutMs,
        queue: config.webhooks.queue ?? (queue instanceof BullMQQueue ? queue.deliveryQueue() : undefined),
        onInternalError: deps.onInternalError,
        now,
      })
    : undefined;
  const onEvent = async (type: JobEventType, job: JobRecord) => sender?.send(type, job);
  const runnerDeps: RunnerDeps = {
    jobs,
    results,
    cutout: deps.cutout,
    imageUrl: deps.imageUrl,
    maxUploadBytes: deps.maxUploadBytes,
    imageConcurrency: config.imageConcurrency,
    retryDelayMs: config.retryDelayMs,
    onEvent,
    onInternalError: deps.onInternalError,
    now,
  };
  queue.start((jobId, signal) => runJob(jobId, signal, runnerDeps));
  const sweeper = setInterval(() => void results.sweep(now()).catch(deps.onInternalError), config.sweepIntervalMs);
  sweeper.unref();

  const routeDeps: JobRoutesDeps = {
    ...deps.routes,
    maxBatchBytes: config.maxBatchBytes,
    jobs,
    results,
    queue,
    callbackPolicy: policy,
    secrets: config.webhooks?.secrets,
    events: { onEvent, onInternalError: deps.onInternalError },
    now,
  };
  return {
    route: (scope) => jobsRoute(scope, routeDeps),
    webhooksIdle: async () => sender?.idle(),
    async close() {
      clearInterval(sweeper);
      await queue.close();
      await sender?.close();
    },
  };
}

export type { CoreRequest };
