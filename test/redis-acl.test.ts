import { readFileSync } from 'node:fs';
import { describe, expect, inject, it } from 'vitest';
import { connectRedis, createRemoveBgHandler, dayOf, hashApiKey, redisReady, RedisKeyStore, type RedisClient } from '../src/core/index.js';
import { RedisIdempotencyStore } from '../src/core/idempotency/redis-store.js';
import { RedisConcurrencyStore } from '../src/core/limits/concurrency.js';
import { RedisQuotaStore } from '../src/core/limits/quota-store.js';
import { RedisUsageMeter } from '../src/core/limits/usage-meter.js';
import { RedisDashboardStore } from '../src/dashboard/index.js';
import { SignInThrottle } from '../src/dashboard/throttle.js';
import { drivenRequest } from './helpers/core-request.js';
import { captureInternalError, recordIssuedKeys } from './helpers/log-capture.js';
import { startRedis } from './helpers/redis-server.js';

/** The ACL line docs/redis.md gives operators, word for word. */
function documentedAcl(): string[] {
  const doc = readFileSync(new URL('../docs/redis.md', import.meta.url), 'utf8');
  const line = /^user bgcut on >PASSWORD .*$/m.exec(doc)?.[0];
  if (!line) throw new Error('docs/redis.md has no `user bgcut on >PASSWORD ...` line');
  return line.split(/\s+/).slice(1).map((rule) => (rule === '>PASSWORD' ? '>acl-test-password' : rule));
}

describe('an ACL user with exactly the commands docs/redis.md lists runs every Redis store', () => {
  it('keys and change events, rate limits, concurrency, quota, usage, Idempotency-Keys, dashboard store and throttle: no NOPERM', async () => {
    // The default user off: only the documented user can do anything. startRedis probes a free
    // port and knows the server ready only when the one answering there is its own child (a
    // probed port can be taken before redis-server binds it).
    const server = await startRedis({ args: ['--user', 'default', 'off', '--user', ...documentedAcl()], probeAuth: { username: 'bgcut', password: 'acl-test-password' } });
    const clients: RedisClient[] = [];
    try {
      const redis = connectRedis(`redis://bgcut:acl-test-password@127.0.0.1:${server.port}`, { onStateChange: () => {} });
      clients.push(redis);
      await redisReady(redis, 10_000);

      const keys = new RedisKeyStore({ redis });
      const { key, record } = await keys.createKey({ accountId: 'acct_acl', plan: 'pro', maxActiveKeys: 5 });
      recordIssuedKeys([key]);
      await keys.listening();
      expect((await keys.findByHash(hashApiKey(key)))?.account.id).toBe('acct_acl');
      const rotated = await keys.rotateKey(record.id, 60_000);
      recordIssuedKeys([rotated.key]);
      await keys.setAccountStatus('acct_acl', 'active');
      expect((await keys.listKeys('acct_acl')).length).toBe(2);
      expect((await keys.listAccounts()).map((a) => a.id)).toEqual(['acct_acl']);

      // The handler's Redis-backed admission: rate limit, concurrency, account summary (usage, quota).
      const handler = createRemoveBgHandler({ keyStore: keys, plans: { pro: { requestsPerMinute: 100, burst: 10, maxConcurrent: 2, monthlyQuota: { unit: 'images', amount: 10 } } }, redis, inference: { address: inject('inferenceAddress') }, onInternalError: captureInternalError });
      const driven = drivenRequest({ key: rotated.key, contentType: 'text/plain' });
      driven.body.end();
      expect((await handler.handle(driven.request)).status).toBe(415);
      expect((await handler.account({ ...drivenRequest({ key: rotated.key, url: '/v1/account' }).request, method: 'GET' })).status).toBe(200);
      await handler.close();

      const concurrency = new RedisConcurrencyStore(redis, 'bgcut');
      const lease = await concurrency.acquire('acct_acl', 1);
      expect(lease).toBeDefined();
      await lease!.release();

      const quotas = new RedisQuotaStore(redis, 'bgcut');
      expect(await quotas.charge('acct_acl:2026-11', 1, 10, 3600, 'op1')).toBe(true);
      await quotas.refund('acct_acl:2026-11', 1, 'op1');
      await quotas.adjust('acct_acl:2026-11', 2, 3600, 'op2');
      expect(await quotas.used('acct_acl:2026-11')).toBe(2);
      const usage = new RedisUsageMeter(redis, 'bgcut');
      await usage.add('acct_acl', '2026-11', 1.5, 1, 'op3');
      expect(await usage.get('acct_acl', '2026-11')).toMatchObject({ images: 1, megapixels: 1.5 });

      const idempotency = new RedisIdempotencyStore(redis);
      const times = { keyTtlMs: 60_000, resultTtlMs: 60_000, inProgressTtlMs: 60_000 };
      expect(await idempotency.claim('acct_acl:k', 'fp', 't', times)).toMatchObject({ state: 'claimed' });
      await idempotency.complete('acct_acl:k', 't', { status: 200, headers: {}, body: Buffer.from('x') }, times);
      expect(await idempotency.claim('acct_acl:k', 'fp', 'u', times)).toMatchObject({ state: 'done', result: { status: 200 } });
      await idempotency.abandon('acct_acl:k', 'u');

      const dashboard = new RedisDashboardStore({ redis });
      const holder = { email: 'acl@example.com', accountId: 'acct_acl', passwordHash: 'scrypt$1$1$1$AA$AA', updatedAt: new Date().toISOString() };
      await dashboard.setHolder(holder);
      expect(await dashboard.findHolder('acl@example.com')).toEqual(holder);
      expect((await dashboard.findAccount('acct_acl'))?.id).toBe('acct_acl');
      const session = { accountId: 'acct_acl', email: 'acl@example.com', csrfToken: 'c', createdAt: new Date().toISOString(), expiresAt: new Date(Date.now() + 60_000).toISOString() };
      await dashboard.createSession('s'.repeat(64), session);
      expect(await dashboard.findSession('s'.repeat(64))).toEqual(session);
      await dashboard.deleteSessionsOf('acct_acl');
      // Today: a fixed day is dropped by the store's write once it is 36 days old.
      const today = dayOf(new Date());
      await dashboard.addActivity({ daily: [{ accountId: 'acct_acl', day: today, count: 2 }], lastUsed: [{ keyId: record.id, at: new Date().toISOString() }] });
      expect(await dashboard.dailyCounts('acct_acl', [today])).toEqual([2]);
      expect(Object.keys(await dashboard.lastUsed([record.id]))).toEqual([record.id]);
      const throttle = new SignInThrottle({}, redis, 'bgcut');
      const attempt = await throttle.signIn('acl@example.com', '127.0.0.1');
      expect(attempt.allowed).toBe(true);
      if (attempt.allowed) await attempt.settle(false);

      // The change channel (PUBLISH, SUBSCRIBE): an instance whose cache keeps keys an hour hears the revocation.
      const listener = new RedisKeyStore({ redis, cacheTtlMs: 3_600_000 });
      await listener.listening();
      expect((await listener.findByHash(hashApiKey(rotated.key)))?.key.revokedAt).toBeNull();
      await keys.revokeKey(rotated.record.id);
      let heard = false;
      for (let i = 0; i < 100 && !heard; i++) {
        heard = Boolean((await listener.findByHash(hashApiKey(rotated.key)))?.key.revokedAt);
        if (!heard) await new Promise((r) => setTimeout(r, 20));
      }
      expect(heard).toBe(true);
      await Promise.all([keys.close(), listener.close()]);
      // And the user is limited: outside the prefix it may do nothing.
      await expect(redis.get('other:thing')).rejects.toThrow(/NOPERM/);
    } finally {
      for (const client of clients) client.disconnect();
      await server.stop();
    }
  });
});
