import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import express from 'express';
import type http from 'node:http';
import Fastify from 'fastify';
import { createRemoveBgRouter } from '../src/adapters/express.js';
import { removeBgPlugin } from '../src/adapters/fastify.js';
import { connectRedis, createRemoveBgHandler, redisReady, type RedisClient, FileKeyStore, RedisKeyStore, type KeyStore, type Plans, type RemoveBgHandler, type RemoveBgOptions } from '../src/core/index.js';
import { recordIssuedKeys, captureInternalError } from './helpers/log-capture.js';
import { startRedis, type RedisServer } from './helpers/redis-server.js';
import { redisTopologies } from './helpers/redis-topologies.js';
import { baseUrlOf } from './conformance/suite.js';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

const PLANS: Plans = {
  hundred: { requestsPerMinute: 100 },
  ten: { requestsPerMinute: 10 },
  serial: { requestsPerMinute: 1000, maxConcurrent: 2 },
  three: { requestsPerMinute: 1000, monthlyQuota: { unit: 'images', amount: 3 } },
};

interface Instance {
  url: string;
  handler: RemoveBgHandler;
  redis: RedisClient;
  close(): Promise<void>;
}

/** One API instance: its own handler, Redis connection and HTTP server, as on its own machine. */
/**
 * One API instance: its own handler, Redis connection and HTTP server, as on its own machine,
 * on Express or Fastify, so both adapters run with Redis-backed limits.
 */
async function startInstance(
  redisUrl: string,
  keyStore: (redis: RedisClient) => KeyStore,
  extra: Partial<RemoveBgOptions> = {},
  framework: 'express' | 'fastify' = 'express',
  commandTimeoutMs?: number,
): Promise<Instance> {
  const redis = connectRedis(redisUrl, commandTimeoutMs ? { commandTimeoutMs } : {});
  await redisReady(redis);
  const handler = createRemoveBgHandler({
    keyStore: keyStore(redis),
    plans: PLANS,
    redis,
    inference: { address: inject('inferenceAddress') },
    onInternalError: captureInternalError,
    ...extra,
  });
  let server: http.Server;
  let stop: () => Promise<void>;
  if (framework === 'express') {
    const app = express().use(createRemoveBgRouter(handler));
    const listening: http.Server = app.listen(0, '127.0.0.1');
    await new Promise((r) => listening.once('listening', r));
    server = listening;
    stop = async () => {
      listening.closeAllConnections();
      await new Promise((r) => listening.close(r));
    };
  } else {
    const app = Fastify();
    await app.register(removeBgPlugin, { handler });
    await app.listen({ port: 0, host: '127.0.0.1' });
    server = app.server;
    stop = () => app.close();
  }
  return {
    url: `${baseUrlOf(server)}/v1/remove-bg`,
    handler,
    redis,
    async close() {
      await stop();
      await handler.close();
      redis.disconnect();
    },
  };
}

/** A request with no body: cheap, and it still passes (or fails) every limit before the body. */
const knock = (url: string, key: string) => fetch(url, { method: 'POST', headers: { 'x-api-key': key } }).then(async (r) => {
  await r.arrayBuffer();
  return r;
});

describe.each(redisTopologies)('limits shared by two API instances through $name', (topology) => {
  let redis: { url: string; stop(): Promise<void> };
  let admin: RedisClient;
  let store: RedisKeyStore;
  let a: Instance;
  let b: Instance;

  beforeAll(async () => {
    redis = await topology.start();
    admin = connectRedis(redis.url);
    await redisReady(admin);
    store = new RedisKeyStore({ redis: admin, cacheTtlMs: 0 });
    // Exact counts are the point here, not outages: a command timeout that a busy 2-core box
    // (three Cluster nodes, other suites) cannot miss.
    a = await startInstance(redis.url, (r) => new RedisKeyStore({ redis: r }), {}, 'express', 5000);
    // The second instance on the other adapter: two frameworks, one set of shared limits.
    b = await startInstance(redis.url, (r) => new RedisKeyStore({ redis: r }), {}, 'fastify', 5000);
    await Promise.all([a.handler.ready(), b.handler.ready()]);
  });

  afterAll(async () => {
    await a?.close();
    await b?.close();
    admin?.disconnect();
    await redis?.stop();
  });

  it('lets exactly 100 of 200 concurrent requests through a limit of 100', async () => {
    const { key } = await store.createKey({ accountId: 'acct_exact', plan: 'hundred' });
    recordIssuedKeys([key]);
    const responses = await Promise.all(Array.from({ length: 200 }, (_, i) => knock(i % 2 ? a.url : b.url, key)));
    const statuses = responses.map((r) => r.status);
    const passed = statuses.filter((s) => s !== 429).length;
    console.log(`shared rate limit: ${passed} of 200 concurrent requests passed a limit of 100 (2 instances)`);
    expect(passed).toBe(100);
    expect(statuses.filter((s) => s === 415)).toHaveLength(100);
    expect(responses.filter((r) => r.status === 429).every((r) => Number(r.headers.get('retry-after')) > 0)).toBe(true);
  });

  it('holds the concurrency limit across instances', async () => {
    const { key } = await store.createKey({ accountId: 'acct_serial', plan: 'serial' });
    recordIssuedKeys([key]);
    const form = async () => {
      const { objectOnTexture } = await import('./helpers/synthetic-image.js');
      const data = new FormData();
      data.append('file', new Blob([(await objectOnTexture(160, 120)).bytes]), 'a.jpg');
      return data;
    };
    const send = async (url: string) => {
      const r = await fetch(url, { method: 'POST', headers: { 'x-api-key': key }, body: await form() });
      const body = Buffer.from(await r.arrayBuffer());
      return { status: r.status, code: r.status === 200 ? undefined : (JSON.parse(body.toString()).code as string) };
    };
    const results = await Promise.all([send(a.url), send(b.url), send(a.url), send(b.url)]);
    expect(results.filter((r) => r.status === 200)).toHaveLength(2);
    expect(results.filter((r) => r.code === 'concurrency_limited')).toHaveLength(2);
    // Slots were released: the account can go again.
    expect((await send(b.url)).status).toBe(200);
  });

  it('holds the monthly quota across instances and meters usage in Redis', async () => {
    const { key } = await store.createKey({ accountId: 'acct_quota', plan: 'three' });
    recordIssuedKeys([key]);
    const { objectOnTexture } = await import('./helpers/synthetic-image.js');
    const bytes = (await objectOnTexture(100, 100)).bytes;
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) {
      const data = new FormData();
      data.append('file', new Blob([bytes]), 'a.jpg');
      const r = await fetch(i % 2 ? a.url : b.url, { method: 'POST', headers: { 'x-api-key': key }, body: data });
      await r.arrayBuffer();
      statuses.push(r.status);
    }
    expect(statuses).toEqual([200, 200, 200, 429, 429]);
    const account = await fetch(a.url.replace('remove-bg', 'account'), { headers: { 'x-api-key': key } });
    const body = (await account.json()) as any;
    expect(body.usage).toMatchObject({ images: 3, megapixels: 0.03 });
    expect(body.quota).toMatchObject({ used: 3, remaining: 0 });
  });
});

describe('while Redis is down', () => {
  let redis: RedisServer;
  let keyStore: FileKeyStore;
  let key: string;

  beforeAll(async () => {
    redis = await startRedis();
    const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-outage-'));
    keyStore = new FileKeyStore({ file: path.join(dir, 'keys.json') });
    key = (await keyStore.createKey({ accountId: 'acct_outage', plan: 'ten' })).key;
    recordIssuedKeys([key]);
  });
  afterAll(() => redis?.stop());

  const waitForRedis = async (instance: Instance) => {
    for (let i = 0; i < 100 && instance.redis.status !== 'ready'; i++) await new Promise((r) => setTimeout(r, 100));
    expect(instance.redis.status).toBe('ready');
  };

  it('fail-closed (default): 503 service_unavailable, never 401 or 429, then recovers by itself', async () => {
    const instance = await startInstance(redis.url, () => keyStore);
    try {
      await waitForRedis(instance);
      expect((await knock(instance.url, key)).status).toBe(415);
      await redis.stop();
      const started = Date.now();
      const during = await knock(instance.url, key);
      expect(during.status).toBe(503);
      expect(Number(during.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(Date.now() - started).toBeLessThan(3000);
      await redis.restart();
      await waitForRedis(instance);
      expect((await knock(instance.url, key)).status).toBe(415);
    } finally {
      await instance.close();
    }
  });

  it('insurance: serves under per-instance limits (1/n of the plan), then recovers', async () => {
    const instance = await startInstance(redis.url, () => keyStore, { redisFailureMode: 'insurance', insuranceInstances: 2 });
    try {
      await waitForRedis(instance);
      await redis.stop();
      const statuses: number[] = [];
      for (let i = 0; i < 8; i++) statuses.push((await knock(instance.url, key)).status);
      // Plan "ten" shared by 2 instances: 5 per instance while Redis is away.
      expect(statuses.filter((s) => s === 415)).toHaveLength(5);
      expect(statuses.filter((s) => s === 429)).toHaveLength(3);
      await redis.restart();
      await waitForRedis(instance);
      expect((await knock(instance.url, key)).status).toBe(415);
    } finally {
      await instance.close();
    }
  });
});
