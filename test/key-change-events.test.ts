import { Redis } from 'ioredis';
import { describe, expect, inject, it } from 'vitest';
import { connectRedis, createRemoveBgHandler, hashApiKey, redisReady, RedisKeyStore, type Plans } from '../src/core/index.js';
import { drivenRequest } from './helpers/core-request.js';
import { captureInternalError, recordIssuedKeys } from './helpers/log-capture.js';
import { startRedis } from './helpers/redis-server.js';
import { redisTopologies, useRedisTopology } from './helpers/redis-topologies.js';

const PLANS: Plans = { free: { requestsPerMinute: 1000 }, pro: { requestsPerMinute: 2000 } };

/** One API instance: its own Redis connection, key store (default 5 s cache) and handler. */
function apiInstance(redis: Redis | import('ioredis').Cluster, keyStore: RedisKeyStore) {
  const handler = createRemoveBgHandler({ keyStore, plans: PLANS, redis, inference: { address: inject('inferenceAddress') }, onInternalError: captureInternalError });
  /** `GET /v1/account` with the key: its status and, when 200, the plan. */
  const account = async (key: string) => {
    const response = await handler.account({ ...drivenRequest({ key, url: '/v1/account' }).request, method: 'GET' });
    const body = JSON.parse(response.body.toString()) as { plan?: string | { name?: string }; code?: string };
    return { status: response.status, code: body.code, plan: typeof body.plan === 'string' ? body.plan : body.plan?.name };
  };
  return { keyStore, handler, account };
}

/** Polls until `done` holds; the time it took, in ms (the event is waited on, the bound asserted after). */
async function timeUntil(done: () => Promise<boolean>, giveUpMs = 8000): Promise<number> {
  const started = performance.now();
  while (!(await done())) {
    if (performance.now() - started > giveUpMs) return Infinity;
    await new Promise((r) => setTimeout(r, 10));
  }
  return performance.now() - started;
}

describe.each(redisTopologies)('a key change made through one API instance reaches another at once, on $name', (topology) => {
  const shared = useRedisTopology(topology);
  const pair = async () => {
    const [ra, rb] = [await shared.connect(), await shared.connect()];
    const a = apiInstance(ra, new RedisKeyStore({ redis: ra }));
    // B's cache would keep a key an hour: only the change event can make B see a change, so the
    // bound below need not race a cache expiry, and has room for a busy box (at load 29 one
    // change took 1.2 s to be seen through the default 5 s cache).
    const b = apiInstance(rb, new RedisKeyStore({ redis: rb, cacheTtlMs: 3_600_000 }));
    await Promise.all([a.keyStore.listening(), b.keyStore.listening()]);
    return { a, b, close: () => Promise.all([a.handler.close(), b.handler.close(), a.keyStore.close(), b.keyStore.close()]) };
  };

  it('revoked, rotated, suspended and moved to another plan through A: B, whose cache keeps keys an hour, acts on each within 5 s', async () => {
    const { a, b, close } = await pair();
    try {
      const first = await a.keyStore.createKey({ accountId: 'acct_ev', plan: 'free' });
      const second = await a.keyStore.createKey({ accountId: 'acct_ev', plan: 'free' });
      recordIssuedKeys([first.key, second.key]);
      // B looks both up: cached for an hour from here.
      expect((await b.account(first.key)).status).toBe(200);
      expect((await b.account(second.key)).plan).toBe('free');

      await a.keyStore.revokeKey(first.record.id);
      const revokedMs = await timeUntil(async () => (await b.account(first.key)).status === 401);

      await a.keyStore.createKey({ accountId: 'acct_ev', plan: 'pro' }).then(({ key }) => recordIssuedKeys([key]));
      const movedMs = await timeUntil(async () => (await b.account(second.key)).plan === 'pro');

      await a.keyStore.setAccountStatus('acct_ev', 'suspended');
      const suspendedMs = await timeUntil(async () => (await b.account(second.key)).status === 403);
      await a.keyStore.setAccountStatus('acct_ev', 'active');
      expect(await timeUntil(async () => (await b.account(second.key)).status === 200)).toBeLessThan(5000);

      const rotated = await a.keyStore.rotateKey(second.record.id, 0);
      recordIssuedKeys([rotated.key]);
      const rotatedMs = await timeUntil(async () => (await b.account(second.key)).status === 401);

      console.log(`key changes seen by the other instance after: revoke ${revokedMs.toFixed(0)} ms, plan move ${movedMs.toFixed(0)} ms, suspend ${suspendedMs.toFixed(0)} ms, rotate ${rotatedMs.toFixed(0)} ms (${topology.name})`);
      for (const ms of [revokedMs, movedMs, suspendedMs, rotatedMs]) expect(ms).toBeLessThan(5000);
    } finally {
      await close();
    }
  });

  it('a subscription that reconnects drops the whole cache (changes sent meanwhile were missed)', async () => {
    const redis = await shared.connect();
    const store = new RedisKeyStore({ redis, cacheTtlMs: 3_600_000 });
    const b = apiInstance(redis, store);
    try {
      await store.listening();
      const { key, record } = await new RedisKeyStore({ redis, subscribe: false }).createKey({ accountId: 'acct_gap', plan: 'free' });
      recordIssuedKeys([key]);
      expect((await b.account(key)).status).toBe(200);
      // Revoked by a writer whose message B cannot hear: B's subscriber is cut off first.
      const subscriber = (store as unknown as { subscriber: Redis }).subscriber;
      const reconnected = new Promise((r) => subscriber.once('ready', r));
      subscriber.disconnect(true);
      await new RedisKeyStore({ redis: await shared.connect(), subscribe: false, cacheTtlMs: 0 }).revokeKey(record.id);
      await reconnected;
      expect((await b.account(key)).status).toBe(401);
    } finally {
      await Promise.all([b.handler.close(), store.close()]);
    }
  });
});

describe('while Redis is paused, a key revoked elsewhere is honoured for at most 60 s after its last confirmation', () => {
  it('59 s: served from memory (Redis unreachable); 61 s: 503, never the revoked key', async () => {
    const server = await startRedis({ debugCommand: true });
    const redis = connectRedis(server.url, { onStateChange: () => {} });
    const admin = new Redis(server.port, '127.0.0.1', { maxRetriesPerRequest: 0 });
    let clock = 1_000_000;
    // B missed the revocation's message (no subscription): only the stale bound protects it.
    const store = new RedisKeyStore({ redis, subscribe: false, now: () => clock });
    const b = apiInstance(redis, store);
    try {
      await redisReady(redis);
      const { key, record } = await new RedisKeyStore({ redis: admin, cacheTtlMs: 0 }).createKey({ accountId: 'acct_stale', plan: 'free' });
      recordIssuedKeys([key]);
      expect((await b.account(key)).status).toBe(200);
      await new RedisKeyStore({ redis: admin, cacheTtlMs: 0, subscribe: false }).revokeKey(record.id);
      // Redis stops answering for 8 s (each lookup gives up after the 1 s command timeout). The
      // three waits below take about 3.2 s: with a 4 s sleep a busy box had under a second to
      // spare before Redis woke and answered the last one (401 instead of 503).
      const paused = admin.call('DEBUG', 'SLEEP', '8').catch(() => {});
      await new Promise((r) => setTimeout(r, 100));
      // The key store alone: /v1/account also reads usage, which Redis cannot answer now.
      clock += 59_000;
      expect((await store.findByHash(hashApiKey(key)))?.key.id).toBe(record.id);
      clock += 2_000;
      await expect(store.findByHash(hashApiKey(key))).rejects.toThrow(/timed out|closed/i);
      const after = await b.account(key);
      expect([after.status, after.code]).toEqual([503, 'service_unavailable']);
      await paused;
      // Redis back: the revocation is read.
      expect((await b.account(key)).status).toBe(401);
    } finally {
      await b.handler.close();
      redis.disconnect();
      admin.disconnect();
      await server.stop();
    }
  });
});
