import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp } from 'node:fs/promises';
import { Webhook } from 'standardwebhooks';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { BullMQDeliveryQueue, BullMQQueue, connectRedis, createRemoveBgHandler, MemoryDeliveryLog, MemoryWebhookSecretStore, RedisJobStore, type CoreRequest, type CoreResponse, type RemoveBgHandler } from '../src/core/index.js';
import { createTestKeys, multipartBody, TEST_PLANS, type TestKeys } from './helpers/fixtures.js';
import { captureInternalError } from './helpers/log-capture.js';
import { objectOnTexture } from './helpers/synthetic-image.js';
import { startRedisCluster, type RedisClusterServer } from './helpers/redis-cluster.js';
import { useRedis } from './helpers/use-redis.js';
import { signal, within } from './helpers/within.js';
import { WebhookSender } from '../src/core/jobs/webhooks/sender.js';
import { newJob } from '../src/core/jobs/job.js';

const redis = useRedis();
let keys: TestKeys;
let image: Buffer;
let resultsDir: string;
beforeAll(async () => {
  keys = await createTestKeys();
  image = (await objectOnTexture(96, 72)).bytes;
  resultsDir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-jobs-redis-'));
});
const handlers: RemoveBgHandler[] = [];
afterAll(async () => {
  await Promise.all(handlers.map((h) => h.close()));
});

function request(method: string, url: string, body?: { body: Buffer; contentType: string }): CoreRequest {
  const stream = new PassThrough();
  stream.end(body?.body ?? Buffer.alloc(0));
  return {
    method,
    url,
    headers: { 'x-api-key': keys.good, ...(body ? { 'content-type': body.contentType, 'content-length': String(body.body.length) } : {}) },
    body: stream,
    signal: new AbortController().signal,
  };
}
const json = (response: CoreResponse) => JSON.parse(response.body.toString()) as Record<string, any>;

describe('jobs with Redis: BullMQ queue, job records in Redis', () => {
  it('a job accepted by an instance without a worker is run by another instance that has one', async () => {
    const { port } = new URL(redis.server.url);
    const connection = { host: '127.0.0.1', port: Number(port), maxRetriesPerRequest: null };
    const common = {
      keyStore: keys.store,
      plans: TEST_PLANS,
      redis: redis.redis,
      inference: { address: inject('inferenceAddress'), timeoutMs: 120_000 },
      onInternalError: captureInternalError,
    };
    // The accepting instance's queue never starts a worker: only the other one can run the job.
    const acceptOnly = new BullMQQueue({ connection, name: 'redis-test' });
    acceptOnly.start = () => {};
    const front = createRemoveBgHandler({ ...common, jobs: { queue: acceptOnly, resultsDir } });
    const back = createRemoveBgHandler({ ...common, jobs: { queue: new BullMQQueue({ connection, name: 'redis-test', concurrency: 1 }), resultsDir } });
    handlers.push(front, back);

    const accepted = await front.jobs!(request('POST', '/v1/jobs', multipartBody([{ name: 'file', filename: 'a.png', type: 'image/png', data: image }])));
    expect(accepted.status).toBe(202);
    const { id } = json(accepted);
    expect(await redis.redis.exists(`bgcut:job:{${id}}`)).toBe(1);
    let status: Record<string, any>;
    const until = Date.now() + 200_000;
    do {
      await new Promise((r) => setTimeout(r, 100));
      status = json(await front.jobs!(request('GET', `/v1/jobs/${id}`)));
    } while (status.state !== 'succeeded' && status.state !== 'failed' && Date.now() < until);
    expect(status.images.map((i: { state: string }) => i.state)).toEqual(['done']);
    // Read back through the accepting instance: the record is shared (the results folder is too, here).
    const result = await front.jobs!(request('GET', `/v1/jobs/${id}/results/0`));
    expect([result.status, result.headers['content-type']]).toEqual([200, 'image/png']);
    expect((await new RedisJobStore(redis.redis).get(id))?.state).toBe('succeeded');
  }, 240_000);
});

describe('jobs on a Redis Cluster (three masters on loopback)', () => {
  let cluster: RedisClusterServer | undefined;
  let handler: RemoveBgHandler | undefined;
  const clients: { disconnect(): void }[] = [];
  afterAll(async () => {
    // The handler (its BullMQ workers) before the cluster it works on.
    await handler?.close();
    for (const client of clients) client.disconnect();
    await cluster?.stop();
  });

  it('BullMQ under its default {bgcut} prefix runs a job there (all of a queue in one slot); an untagged prefix is refused at construction', async () => {
    cluster = await startRedisCluster();
    const connection = new Cluster(
      cluster.ports.map((port) => ({ host: '127.0.0.1', port })),
      { redisOptions: { maxRetriesPerRequest: null } },
    );
    const redis = connectRedis(cluster.url) as Cluster;
    clients.push(connection, redis);
    if (redis.status !== 'ready') await new Promise((resolve) => redis.once('ready', resolve));
    expect(() => new BullMQQueue({ connection, prefix: 'bgcut' })).toThrow(/hash-tagged prefix/);

    handler = createRemoveBgHandler({
      keyStore: keys.store,
      plans: TEST_PLANS,
      redis,
      inference: { address: inject('inferenceAddress'), timeoutMs: 120_000 },
      onInternalError: captureInternalError,
      jobs: { queue: new BullMQQueue({ connection, name: 'cluster-test', concurrency: 1 }), resultsDir },
    });
    await handler.ready();
    const accepted = await handler.jobs!(request('POST', '/v1/jobs', multipartBody([{ name: 'file', filename: 'a.png', type: 'image/png', data: image }])));
    expect([accepted.status, accepted.status === 202 ? '' : accepted.body.toString()]).toEqual([202, '']);
    const { id } = json(accepted);
    let status: Record<string, any>;
    const until = Date.now() + 200_000;
    do {
      await new Promise((r) => setTimeout(r, 100));
      status = json(await handler.jobs!(request('GET', `/v1/jobs/${id}`)));
    } while (status.state !== 'succeeded' && status.state !== 'failed' && Date.now() < until);
    expect(status.images.map((i: { state: string }) => i.state)).toEqual(['done']);
    // The queue's keys, found on every master: all in the tag's one slot (BullMQ's scripts ran there).
    const found = (await Promise.all(redis.nodes('master').map((node) => node.keys('{bgcut}:cluster-test:*')))).flat();
    expect(found.length).toBeGreaterThan(0);
    const slots = new Set(await Promise.all(found.map(async (k) => Number(await redis.call('CLUSTER', 'KEYSLOT', k)))));
    expect(slots).toEqual(new Set([Number(await redis.call('CLUSTER', 'KEYSLOT', 'bgcut'))]));
  }, 240_000);
});

describe('webhook deliveries through BullMQ (BullMQDeliveryQueue)', () => {
  it('a receiver that fails twice then succeeds gets the event on the third attempt, after the backoff, under one webhook-id; sending it again adds nothing', async () => {
    const secrets = new MemoryWebhookSecretStore();
    const secret = await secrets.rotate('acct_hooks');
    const deliveries = new MemoryDeliveryLog();
    const received: { at: number; id: string; status: number }[] = [];
    const thirdAttempt = signal();
    const receiver = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        new Webhook(secret).verify(Buffer.concat(chunks).toString(), req.headers as Record<string, string>);
        const status = received.length < 2 ? 503 : 204;
        received.push({ at: Date.now(), id: String(req.headers['webhook-id']), status });
        res.writeHead(status).end();
        if (received.length === 3) thirdAttempt.resolve();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    const port = (receiver.address() as AddressInfo).port;
    const connection = { host: '127.0.0.1', port: redis.server.port, maxRetriesPerRequest: null };
    const sender = new WebhookSender({
      secrets,
      deliveries,
      policy: { allowedPorts: [port], resolver: async () => [], allowLoopbackForTesting: true },
      retryDelaysMs: [150, 300],
      queue: new BullMQDeliveryQueue({ connection, name: 'webhooks-test' }),
      onInternalError: captureInternalError,
    });
    try {
      const job = newJob({ id: 'job-hooks-1', accountId: 'acct_hooks', plan: 'free', fields: {}, sources: [], callbackUrl: `http://127.0.0.1:${port}/in`, createdAt: new Date().toISOString(), retentionMs: 60_000 });
      await sender.send('job.completed', job);
      await within(thirdAttempt.promise, 45_000, () => JSON.stringify(received));
      expect(received.map((r) => [r.id, r.status])).toEqual([
        ['msg_job-hooks-1_job.completed', 503],
        ['msg_job-hooks-1_job.completed', 503],
        ['msg_job-hooks-1_job.completed', 204],
      ]);
      expect(received[1]!.at - received[0]!.at).toBeGreaterThanOrEqual(140);
      expect(received[2]!.at - received[1]!.at).toBeGreaterThanOrEqual(290);
      // The third attempt stays in flight until it has read the 204 and written the log.
      await sender.idle();
      await sender.send('job.completed', job);
      // Nothing to wait on when nothing is sent: a half-second in which a fourth request would show.
      await new Promise((r) => setTimeout(r, 500));
      expect(received).toHaveLength(3);
      const [entry] = await deliveries.list('acct_hooks');
      expect([entry!.state, entry!.attempts.map((a) => a.status)]).toEqual(['delivered', [503, 503, 204]]);
    } finally {
      await sender.close();
      receiver.close();
    }
  });
});
