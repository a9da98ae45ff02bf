import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { generateApiKey, hashApiKey } from '../../src/core/auth/api-key.js';
import { newKey, NotFoundError } from '../../src/core/auth/key-records.js';
import { redisAccountKey, RedisKeyStore } from '../../src/core/auth/redis-key-store.js';
import { useRedis } from '../helpers/use-redis.js';

/**
 * RedisKeyStore on a real redis-server: when it subscribes to changes, a lookup racing a change,
 * what its indexes and listings do with records that are missing or inconsistent, the retries of
 * a creation whose account changed under it. Layout and channel names are the ones documented on
 * the class (`<prefix>:keyhash:<sha256>`, `<prefix>:{a:<account>}:…`, `<prefix>:key-events`).
 * Where the test must watch or hold a command, the store gets the real client behind a Proxy.
 */
describe('RedisKeyStore: subscription, races, indexes and listings', () => {
  const shared = useRedis();
  const stores: RedisKeyStore[] = [];
  const clients: Redis[] = [];
  afterEach(async () => {
    await Promise.all(stores.splice(0).map((store) => store.close()));
    for (const client of clients.splice(0)) client.disconnect();
  });
  let prefixes = 0;
  const prefix = () => `rks${++prefixes}`;
  const make = (options: Partial<ConstructorParameters<typeof RedisKeyStore>[0]> & { keyPrefix: string }) => {
    const store = new RedisKeyStore({ redis: shared.redis, ...options });
    stores.push(store);
    return store;
  };
  /** The shared client with some methods replaced (the rest are the client's own). */
  const wrap = (overrides: Record<string, (...args: never[]) => unknown>): Redis =>
    new Proxy(shared.redis, {
      get(target, property) {
        if (typeof property === 'string' && overrides[property]) return overrides[property];
        const value = Reflect.get(target, property, target) as unknown;
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
  const recordKey = (p: string, accountId: string, keyId: string) => `${redisAccountKey(p, accountId, 'key')}:${keyId}`;
  /** Rewrites a stored key record behind every store's back (no message published). */
  const rewrite = async (p: string, accountId: string, keyId: string, change: Record<string, unknown>) => {
    const raw = await shared.redis.get(recordKey(p, accountId, keyId));
    await shared.redis.set(recordKey(p, accountId, keyId), JSON.stringify({ ...JSON.parse(raw!), ...change }));
  };
  const within = <T>(promise: Promise<T>, ms: number, what: string) =>
    Promise.race([promise, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms))]);

  it('subscribes once, at its first lookup, on <prefix>:key-events, when it keeps keys in memory (cacheTtlMs or maxStaleMs above 0) and subscribe is not false', async () => {
    const cases: [Partial<ConstructorParameters<typeof RedisKeyStore>[0]>, number][] = [
      [{}, 1],
      [{ cacheTtlMs: 5000, maxStaleMs: 0 }, 1],
      [{ cacheTtlMs: 0, maxStaleMs: 60_000 }, 1],
      [{ cacheTtlMs: 0, maxStaleMs: 0 }, 0],
      [{ subscribe: false }, 0],
    ];
    for (const [options, connections] of cases) {
      const p = prefix();
      let duplicates = 0;
      const redis = wrap({ duplicate: () => (duplicates++, shared.redis.duplicate()) });
      const store = make({ redis, keyPrefix: p, ...options });
      await store.findByHash(hashApiKey(generateApiKey()));
      await store.findByHash(hashApiKey(generateApiKey()));
      expect(duplicates, JSON.stringify(options)).toBe(connections);
      if (connections === 0) continue;
      await within(store.listening(), 10_000, 'listening()');
      expect(duplicates, 'listening() after a lookup opens no second connection').toBe(1);
      expect(await shared.redis.pubsub('NUMSUB', `${p}:key-events`)).toEqual([`${p}:key-events`, 1]);
    }
  });

  it('a client made with lazyConnect: its duplicate is connected by the store, and listening() resolves', async () => {
    const p = prefix();
    const lazy = new Redis(shared.server.url, { lazyConnect: true });
    clients.push(lazy);
    const store = make({ redis: lazy, keyPrefix: p });
    await within(store.listening(), 10_000, 'listening() on a lazy client');
    expect(await shared.redis.pubsub('NUMSUB', `${p}:key-events`)).toEqual([`${p}:key-events`, 1]);
  });

  it('a lookup that read Redis before a change was heard is not remembered; neither is one that spans a resubscription-style reset and a message', async () => {
    const p = prefix();
    const clock = { now: 5_000_000 };
    // Holds the first MGET (the lookup's read of the record and account) after it has read.
    let gate: { reached: () => void; release: Promise<void> } | undefined;
    const redis = wrap({
      mget: (async (...keys: string[]) => {
        const read = await shared.redis.mget(...keys);
        const held = gate;
        gate = undefined;
        if (held) {
          held.reached();
          await held.release;
        }
        return read;
      }) as never,
    });
    const hold = () => {
      let release!: () => void;
      const reached = new Promise<void>((resolve) => {
        gate = { reached: resolve, release: new Promise<void>((r) => (release = r)) };
      });
      return { reached, release: () => release() };
    };
    const writer = make({ keyPrefix: p, subscribe: false });

    // 1. The store's own revocation while its lookup is in flight (applied here at once; no
    // subscription, so no echo of it arrives later).
    const alone = make({ redis, keyPrefix: p, now: () => clock.now, subscribe: false });
    const own = await alone.createKey({ accountId: 'acct_g', plan: 'p' });
    let held = hold();
    const lookup = alone.findByHash(hashApiKey(own.key));
    await held.reached;
    await alone.revokeKey(own.record.id);
    held.release();
    expect((await lookup)?.key.revokedAt, 'the lookup answers what it read').toBeNull();
    expect((await alone.findByHash(hashApiKey(own.key)))?.key.revokedAt, 'not remembered: the clock has not moved, yet Redis is read').toBeTypeOf('string');

    // 2. Two things heard while a lookup is in flight: a message it cannot read (the whole cache
    // is dropped, as when the subscription reconnects) and an account change. Neither may leave
    // the lookup's answer in memory. Keys made before the reader subscribes: no message of
    // theirs is still on its way to it.
    const target = await writer.createKey({ accountId: 'acct_t', plan: 'p' });
    const probe = await writer.createKey({ accountId: 'acct_q', plan: 'p' });
    const reader = make({ redis, keyPrefix: p, now: () => clock.now });
    await within(reader.listening(), 10_000, 'listening()');
    expect((await reader.findByHash(hashApiKey(probe.key)))?.key.label).toBeUndefined();
    await rewrite(p, 'acct_q', probe.record.id, { label: 'changed behind its back' });
    held = hold();
    const racing = reader.findByHash(hashApiKey(target.key));
    await held.reached;
    await rewrite(p, 'acct_t', target.record.id, { label: 'changed after it was read' });
    await shared.redis.publish(`${p}:key-events`, 'not json');
    // Heard once the probe, remembered until now, is read from Redis again.
    const deadline = Date.now() + 10_000;
    while ((await reader.findByHash(hashApiKey(probe.key)))?.key.label !== 'changed behind its back') {
      if (Date.now() > deadline) throw new Error('an unreadable message did not drop the cache');
      await new Promise((r) => setTimeout(r, 10));
    }
    await writer.setAccountStatus('acct_q', 'suspended');
    while ((await reader.findByHash(hashApiKey(probe.key)))?.account.status !== 'suspended') {
      if (Date.now() > deadline) throw new Error('the account change was not heard');
      await new Promise((r) => setTimeout(r, 10));
    }
    held.release();
    expect((await racing)?.key.label).toBeUndefined();
    expect((await reader.findByHash(hashApiKey(target.key)))?.key.label).toBe('changed after it was read');
  });

  it('a remembered key past its TTL is served only while Redis cannot be reached: an error reply is thrown as it came', async () => {
    const p = prefix();
    const clock = { now: 1_000_000 };
    const store = make({ keyPrefix: p, cacheTtlMs: 1000, subscribe: false, now: () => clock.now });
    const { key, record } = await store.createKey({ accountId: 'acct_e', plan: 'p' });
    expect((await store.findByHash(hashApiKey(key)))?.key.id).toBe(record.id);
    clock.now += 1000;
    // The index under the key's hash is now a set: Redis answers GET with WRONGTYPE (it is up).
    await shared.redis.del(`${p}:keyhash:${record.hash}`);
    await shared.redis.sadd(`${p}:keyhash:${record.hash}`, 'x');
    await expect(store.findByHash(hashApiKey(key))).rejects.toThrow(/^WRONGTYPE/);
    // A key never looked up: the same error, not a failure of the store's own.
    const never = generateApiKey();
    await shared.redis.sadd(`${p}:keyhash:${hashApiKey(never)}`, 'x');
    await expect(store.findByHash(hashApiKey(never))).rejects.toThrow(/^WRONGTYPE/);
  });

  it('an index to nothing finds nothing: no record, no account, or a record of another hash', async () => {
    const p = prefix();
    const store = make({ keyPrefix: p, cacheTtlMs: 0, maxStaleMs: 0 });
    const kept = await store.createKey({ accountId: 'acct_i', plan: 'p' });
    const orphan = hashApiKey(generateApiKey());
    // What a creation writes first: the index, before the record it points to.
    await shared.redis.set(`${p}:keyhash:${orphan}`, 'acct_i key_000000000000');
    expect(await store.findByHash(orphan)).toBeUndefined();
    // An index naming a real record whose hash is another key's.
    const stranger = hashApiKey(generateApiKey());
    await shared.redis.set(`${p}:keyhash:${stranger}`, `acct_i ${kept.record.id}`);
    expect(await store.findByHash(stranger)).toBeUndefined();
    expect((await store.findByHash(hashApiKey(kept.key)))?.key.id).toBe(kept.record.id);
    // The record without its account.
    await shared.redis.del(redisAccountKey(p, 'acct_i', 'account'));
    expect(await store.findByHash(hashApiKey(kept.key))).toBeUndefined();
  });

  it('with maxStaleMs 0 (no serving while Redis is away) a looked-up key is still served from memory for cacheTtlMs', async () => {
    const p = prefix();
    const clock = { now: 3_000_000 };
    const store = make({ keyPrefix: p, cacheTtlMs: 5000, maxStaleMs: 0, subscribe: false, now: () => clock.now });
    const { key, record } = await store.createKey({ accountId: 'acct_m0', plan: 'p' });
    expect((await store.findByHash(hashApiKey(key)))?.key.label).toBeUndefined();
    await rewrite(p, 'acct_m0', record.id, { label: 'changed behind its back' });
    clock.now += 4999;
    expect((await store.findByHash(hashApiKey(key)))?.key.label).toBeUndefined();
    clock.now += 1;
    expect((await store.findByHash(hashApiKey(key)))?.key.label).toBe('changed behind its back');
  });

  it('unknown keys are not remembered: guessing does not push a known key out of a small cache', async () => {
    const p = prefix();
    const store = make({ keyPrefix: p, cacheMaxEntries: 2, subscribe: false, now: () => 1 });
    const { key, record } = await store.createKey({ accountId: 'acct_u', plan: 'p' });
    expect((await store.findByHash(hashApiKey(key)))?.key.label).toBeUndefined();
    for (let i = 0; i < 3; i++) expect(await store.findByHash(hashApiKey(generateApiKey()))).toBeUndefined();
    await rewrite(p, 'acct_u', record.id, { label: 'changed behind its back' });
    expect((await store.findByHash(hashApiKey(key)))?.key.label, 'still served from memory').toBeUndefined();
  });

  it('listKeys() lists every account\'s keys oldest first; listAccounts() by id; ids without records are skipped', async () => {
    const p = prefix();
    const store = make({ keyPrefix: p, cacheTtlMs: 0 });
    // Six keys of three accounts, their creation times then set apart (they were made within a
    // few ms) in an order that is neither the order they were made in nor the accounts' order.
    // Redis returns a set's members in an order of its own: with six, listing them unsorted
    // would match by chance once in hundreds.
    const accounts = ['acct_c', 'acct_a', 'acct_e', 'acct_b', 'acct_f', 'acct_d'];
    const made: { id: string; accountId: string }[] = [];
    for (const accountId of [...accounts.slice(0, 3), ...accounts.slice(0, 3)]) made.push({ id: (await store.createKey({ accountId, plan: 'p' })).record.id, accountId });
    const months = [4, 1, 6, 2, 5, 3];
    for (const [i, { id, accountId }] of made.entries()) await rewrite(p, accountId, id, { createdAt: `2024-0${months[i]}-01T00:00:00.000Z` });
    // Three accounts without keys.
    for (const accountId of accounts.slice(3)) await shared.redis.set(redisAccountKey(p, accountId, 'account'), JSON.stringify({ id: accountId, plan: 'p', status: 'active' }));
    await shared.redis.sadd(`${p}:accounts`, ...accounts.slice(3));
    // What an interrupted creation can leave: an account id with no account record and no keys,
    // and a key id in an account's set with no record.
    await shared.redis.sadd(`${p}:accounts`, 'acct_0ghost');
    await shared.redis.sadd(redisAccountKey(p, 'acct_a', 'keys'), 'key_000000000000');
    const byMonth = [...made.keys()].sort((x, y) => months[x]! - months[y]!).map((i) => made[i]!.id);
    expect((await store.listKeys()).map((k) => k.id)).toEqual(byMonth);
    expect((await store.listKeys('acct_a')).map((k) => k.id)).toEqual([made[1]!.id, made[4]!.id]);
    expect(await store.listKeys('acct_0ghost')).toEqual([]);
    expect((await store.listAccounts()).map((a) => a.id)).toEqual(['acct_a', 'acct_b', 'acct_c', 'acct_d', 'acct_e', 'acct_f']);
  });

  it('a creation whose account\'s keys changed after it read them reads them again; after 20 such tries it gives up and leaves no index', async () => {
    const p = prefix();
    const setup = make({ keyPrefix: p, cacheTtlMs: 0 });
    await setup.createKey({ accountId: 'acct_c', plan: 'p' });
    const keysSet = redisAccountKey(p, 'acct_c', 'keys');
    // Reads of the account's key ids that miss the key already there, `stale` times.
    const racing = (stale: number) => {
      const reads = { count: 0 };
      const redis = wrap({
        smembers: (async (key: string) => {
          if (key !== keysSet) return shared.redis.smembers(key);
          reads.count++;
          return reads.count <= stale ? [] : shared.redis.smembers(key);
        }) as never,
      });
      return { reads, store: make({ redis, keyPrefix: p, cacheTtlMs: 0 }) };
    };
    const indexes = async () => (await shared.redis.keys(`${p}:keyhash:*`)).length;

    const once = racing(1);
    const made = await once.store.createKey({ accountId: 'acct_c', plan: 'p' });
    expect(once.reads.count).toBe(2);
    expect((await setup.listKeys('acct_c')).map((k) => k.id)).toContain(made.record.id);

    const before = await indexes();
    const always = racing(Infinity);
    await expect(always.store.createKey({ accountId: 'acct_c', plan: 'p' })).rejects.toThrow(/changed/);
    expect(always.reads.count).toBe(20);
    expect(await indexes()).toBe(before);
    expect(await setup.listKeys('acct_c')).toHaveLength(2);
  });

  it('rotating a key whose account record is gone is NotFoundError naming both, and leaves no index for the new key', async () => {
    const p = prefix();
    const store = make({ keyPrefix: p, cacheTtlMs: 0 });
    const { record } = await store.createKey({ accountId: 'acct_x', plan: 'p' });
    await shared.redis.del(redisAccountKey(p, 'acct_x', 'account'));
    const error = await store.rotateKey(record.id, 1000).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NotFoundError);
    expect((error as Error).message).toBe(`no key ${record.id} or no account acct_x`);
    expect(await shared.redis.keys(`${p}:keyhash:*`)).toEqual([`${p}:keyhash:${record.hash}`]);
    expect(await shared.redis.keys(`${p}:keyid:*`)).toEqual([`${p}:keyid:${record.id}`]);
  });

  it('revoking a key whose record vanished after it was found is NotFoundError naming it', async () => {
    const p = prefix();
    let taken = false;
    const redis = wrap({
      get: (async (key: string) => {
        const value = await shared.redis.get(key);
        // The record is read, then deleted (by anything else) before the revocation's script runs.
        if (!taken && key.includes(':key:') && value) {
          taken = true;
          await shared.redis.del(key);
        }
        return value;
      }) as never,
    });
    const setup = make({ keyPrefix: p, cacheTtlMs: 0 });
    const { record } = await setup.createKey({ accountId: 'acct_v', plan: 'p' });
    const error = await make({ redis, keyPrefix: p, cacheTtlMs: 0 }).revokeKey(record.id).catch((e: unknown) => e);
    expect(taken).toBe(true);
    expect(error).toBeInstanceOf(NotFoundError);
    expect((error as Error).message).toBe(`no key ${record.id}`);
  });

  it('the legacy migration skips an id whose legacy record is missing, and counts only what it copied', async () => {
    const p = prefix();
    const good = newKey({ accountId: 'acct_l' });
    const lost = newKey({ accountId: 'acct_l' });
    await shared.redis.set(`${p}:account:acct_l`, JSON.stringify({ id: 'acct_l', plan: 'pro', status: 'active' }));
    await shared.redis.sadd(`${p}:accounts`, 'acct_l');
    await shared.redis.sadd(`${p}:account-keys:acct_l`, good.record.id, lost.record.id);
    await shared.redis.set(`${p}:key:${good.record.hash}`, JSON.stringify(good.record));
    await shared.redis.set(`${p}:keyid:${good.record.id}`, good.record.hash);
    await shared.redis.set(`${p}:keyid:${lost.record.id}`, lost.record.hash); // its record is not there
    const store = make({ keyPrefix: p, cacheTtlMs: 0 });
    expect(await store.migrateLegacyLayout()).toEqual({ accounts: 1, keys: 1 });
    expect((await store.listKeys('acct_l')).map((k) => k.id)).toEqual([good.record.id]);
    expect(await shared.redis.get(recordKey(p, 'acct_l', lost.record.id))).toBeNull();
    expect(await store.migrateLegacyLayout()).toEqual({ accounts: 0, keys: 0 });
  });
});
