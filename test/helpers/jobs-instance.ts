/**
 * One API instance with jobs on Redis, as its own process (test/jobs-kill.test.ts starts two and
 * SIGKILLs one): the example Express app around a handler whose jobs go through BullMQ, whose
 * records, quota, usage and webhook deliveries are in Redis and whose results are in a folder the
 * instances share. Environment:
 *   JOBS_REDIS_URL  JOBS_INFERENCE=host:port  JOBS_KEYS_FILE  JOBS_RESULTS_DIR  JOBS_WORKER_NAME
 *   JOBS_CALLBACK_PORT (a loopback receiver's port, allowed for callbacks)
 *   JOBS_LOCK_MS (BullMQ lock: how soon a dead instance's work is taken over)  JOBS_RETRY_MS=a,b,c (webhook waits)
 * Prints `listening <port>`.
 */
import type { AddressInfo } from 'node:net';
import { createExpressApp } from '../../examples/express-app.js';
import { BullMQQueue, connectRedis, createRemoveBgHandler, FileKeyStore, LocalResultsStore, RedisWebhookSecretStore, type Plans } from '../../src/core/index.js';

export const JOBS_KILL_PLANS: Plans = {
  // A monthly quota, so each image's charge is counted where GET /v1/account reads it back.
  batch: { requestsPerMinute: 100_000, maxBatchImages: 50, monthlyQuota: { unit: 'images', amount: 10_000 } },
};

const env = process.env;
if (env.JOBS_REDIS_URL) {
  const { hostname, port } = new URL(env.JOBS_REDIS_URL);
  const redis = connectRedis(env.JOBS_REDIS_URL);
  const lockMs = Number(env.JOBS_LOCK_MS ?? 30_000);
  const queue = new BullMQQueue({
    connection: { host: hostname, port: Number(port), maxRetriesPerRequest: null },
    workerName: env.JOBS_WORKER_NAME,
    concurrency: 1,
    lockDurationMs: lockMs,
    stalledIntervalMs: Math.max(500, Math.round(lockMs / 4)),
    onError: (error) => console.error(`bullmq: ${error instanceof Error ? error.message : String(error)}`),
  });
  const handler = createRemoveBgHandler({
    keyStore: new FileKeyStore({ file: env.JOBS_KEYS_FILE!, reloadIntervalMs: 0 }),
    plans: JOBS_KILL_PLANS,
    redis,
    inference: { address: env.JOBS_INFERENCE!, timeoutMs: 60_000 },
    imageUrl: { allowLoopbackForTesting: true, allowedPorts: [80, 443, Number(env.JOBS_CALLBACK_PORT ?? 80)] },
    jobs: {
      queue,
      results: new LocalResultsStore(env.JOBS_RESULTS_DIR!),
      imageConcurrency: 1,
      webhooks: { secrets: new RedisWebhookSecretStore(redis), retryDelaysMs: (env.JOBS_RETRY_MS ?? '1000').split(',').map(Number) },
    },
    onInternalError: (error) => console.error(`internal error: ${error instanceof Error ? error.message : String(error)}`),
  });
  await handler.ready();
  const server = createExpressApp(handler).listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  console.log(`listening ${(server.address() as AddressInfo).port}`);
}
