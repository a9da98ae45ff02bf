import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectRedis } from '../src/core/redis.js';
import { hashApiKey } from '../src/core/auth/api-key.js';
import { FileKeyStore } from '../src/core/auth/file-key-store.js';
import { RedisKeyStore } from '../src/core/auth/redis-key-store.js';
import { TooManyKeysError } from '../src/core/auth/key-records.js';
import type { KeyAdmin } from '../src/core/auth/key-store.js';
import { recordIssuedKeys } from './helpers/log-capture.js';
import { startRedis, type RedisServer } from './helpers/redis-server.js';
import { startReplyDroppingProxy } from './helpers/reply-dropping-proxy.js';

const quiet = { onStateChange: () => {} };
const ready = (redis: Redis) => (redis.status === 'ready' ? Promise.resolve() : new Promise<void>((r) => redis.once('ready', () => r())));

let server: RedisServer;
let redis: Redis;
beforeAll(async () => {
  server = await startRedis();
  redis = connectRedis(server.url, quiet);
  await ready(redis);
});
afterAll(async () => {
  redis?.disconnect();
  await server?.stop();
});
const prefix = () => `k${Math.random().toString(36).slice(2)}`;

describe('RedisKeyStore writes a key change in one step, and a failed step is a failure', () => {
  it('a rotation whose connection drops after its first write leaves the old key as it was, or with its successor stored', async () => {
    const proxy = await startReplyDroppingProxy(server.port);
    const viaProxy = connectRedis(proxy.url, quiet);
    await ready(viaProxy);
    const keyPrefix = prefix();
    const admin = new RedisKeyStore({ redis, keyPrefix, cacheTtlMs: 0 });
    const { key, record } = await admin.createKey({ accountId: 'acct_rot', plan: 'free' });
    recordIssuedKeys([key]);
    proxy.cutAfter('$4\r\neval\r\n'); // the first script of the rotation runs; nothing after it reaches Redis
    await expect(new RedisKeyStore({ redis: viaProxy, keyPrefix, cacheTtlMs: 0 }).rotateKey(record.id, 3_600_000)).rejects.toThrow();
    const keys = await admin.listKeys('acct_rot');
    const old = keys.find((k) => k.id === record.id)!;
    // Never the old key shortened with no key to switch to.
    if (old.expiresAt !== null) expect(keys).toHaveLength(2);
    else expect(keys).toHaveLength(1);
    viaProxy.disconnect();
    await proxy.close();
  });

  it('a rotation gives the new key the old one\'s end and shortens the old one to the overlap', async () => {
    const keys = new RedisKeyStore({ redis, keyPrefix: prefix(), cacheTtlMs: 0 });
    const ends = new Date(Date.now() + 30 * 86_400_000);
    const { key, record } = await keys.createKey({ accountId: 'acct_ends', plan: 'free', expiresAt: ends, label: 'ci' });
    const rotated = await keys.rotateKey(record.id, 60_000);
    recordIssuedKeys([key, rotated.key]);
    expect(rotated.record).toMatchObject({ accountId: 'acct_ends', expiresAt: ends.toISOString(), label: 'ci', revokedAt: null });
    expect(Date.parse(rotated.old.expiresAt!)).toBeLessThanOrEqual(Date.now() + 60_000);
    expect((await keys.findByHash(hashApiKey(rotated.key)))?.key.id).toBe(rotated.record.id);
  });

  it('a key creation that Redis refuses part of rejects, and stores nothing', async () => {
    const keyPrefix = prefix();
    const keys = new RedisKeyStore({ redis, keyPrefix, cacheTtlMs: 0 });
    await redis.hset(`${keyPrefix}:{a:acct_bad}:account`, 'not', 'json'); // a value of the wrong type
    await expect(keys.createKey({ accountId: 'acct_bad', plan: 'free' })).rejects.toThrow(/WRONGTYPE/);
    // No record, and no index to one (the indexes written before the script are taken back).
    expect(await redis.keys(`${keyPrefix}:*key*`)).toEqual([]);
    expect(await redis.smembers(`${keyPrefix}:{a:acct_bad}:keys`)).toEqual([]);
  });
});

describe.each([
  ['RedisKeyStore', async (): Promise<KeyAdmin> => new RedisKeyStore({ redis, keyPrefix: prefix(), cacheTtlMs: 0 })],
  ['FileKeyStore', async (): Promise<KeyAdmin> => new FileKeyStore({ file: path.join(await mkdtemp(path.join(os.tmpdir(), 'bgcut-keys-')), 'keys.json') })],
])('%s: the ceiling on active keys holds against parallel creations', (_, make) => {
  it('20 creations at once under a ceiling of 5 make exactly 5 keys; the rest are refused', async () => {
    const keys = await make();
    const results = await Promise.allSettled(Array.from({ length: 20 }, () => keys.createKey({ accountId: 'acct_many', plan: 'free', maxActiveKeys: 5 })));
    recordIssuedKeys(results.flatMap((r) => (r.status === 'fulfilled' ? [r.value.key] : [])));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(5);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(TooManyKeysError);
    expect(await keys.listKeys('acct_many')).toHaveLength(5);
  });

  it('revoked and expired keys do not count against the ceiling', async () => {
    const keys = await make();
    const a = await keys.createKey({ accountId: 'acct_turn', plan: 'free', maxActiveKeys: 1 });
    const b = await keys.createKey({ accountId: 'acct_turn', plan: 'free', expiresAt: new Date(Date.now() - 1000) });
    recordIssuedKeys([a.key, b.key]);
    await expect(keys.createKey({ accountId: 'acct_turn', plan: 'free', maxActiveKeys: 1 })).rejects.toBeInstanceOf(TooManyKeysError);
    await keys.revokeKey(a.record.id);
    const c = await keys.createKey({ accountId: 'acct_turn', plan: 'free', maxActiveKeys: 1 });
    recordIssuedKeys([c.key]);
  });
});

describe('RedisKeyStore key cache forgets the least recently used key first', () => {
  it('with room for two, a key used again survives a third key; the one not used again is forgotten', async () => {
    const keyPrefix = prefix();
    const admin = new RedisKeyStore({ redis, keyPrefix, cacheTtlMs: 0 });
    const [a, b, c] = await Promise.all(['acct_a', 'acct_b', 'acct_c'].map((accountId) => admin.createKey({ accountId, plan: 'free' })));
    recordIssuedKeys([a!.key, b!.key, c!.key]);
    const proxy = await startReplyDroppingProxy(server.port);
    const viaProxy = connectRedis(proxy.url, quiet);
    await ready(viaProxy);
    const keys = new RedisKeyStore({ redis: viaProxy, keyPrefix, cacheTtlMs: 0, cacheMaxEntries: 2 });
    const hash = (k: string) => hashApiKey(k);
    await keys.findByHash(hash(a!.key));
    await keys.findByHash(hash(b!.key));
    await keys.findByHash(hash(a!.key)); // a is the most recently used now
    await keys.findByHash(hash(c!.key)); // one of a, b must go
    await proxy.close(); // Redis unreachable: only remembered keys are served (maxStaleMs)
    await new Promise<void>((r) => (viaProxy.status === 'ready' ? viaProxy.once('close', () => r()) : r()));
    expect((await keys.findByHash(hash(a!.key)))?.account.id).toBe('acct_a');
    expect((await keys.findByHash(hash(c!.key)))?.account.id).toBe('acct_c');
    await expect(keys.findByHash(hash(b!.key))).rejects.toThrow();
    viaProxy.disconnect();
  });
});
