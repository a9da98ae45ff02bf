import { afterEach, describe, expect, it } from 'vitest';
import { hashApiKey } from '../../src/core/auth/api-key.js';
import { RedisKeyStore } from '../../src/core/auth/redis-key-store.js';
import { expectRevocationSeenAt } from '../helpers/key-store-staleness.js';
import { useRedis } from '../helpers/use-redis.js';

/**
 * RedisKeyStore's lookup cache, on a real redis-server with the store's clock injected: how long a
 * looked-up key is served from memory, and which changes heard from other instances drop which
 * entries. A second store on the same prefix stands for another API instance (or the CLI).
 */
describe('RedisKeyStore: the lookup cache and the changes it hears', () => {
  const shared = useRedis();
  const stores: RedisKeyStore[] = [];
  afterEach(async () => {
    await Promise.all(stores.splice(0).map((store) => store.close()));
  });
  let prefixes = 0;
  /** Two instances on a fresh prefix: `reader` with a clock the test sets, `writer` that changes keys. */
  const pair = (options: { subscribe?: boolean; cacheTtlMs?: number } = {}) => {
    const keyPrefix = `cache${++prefixes}`;
    const clock = { now: 1_000_000 };
    const reader = new RedisKeyStore({ redis: shared.redis, keyPrefix, now: () => clock.now, ...options });
    const writer = new RedisKeyStore({ redis: shared.redis, keyPrefix, subscribe: false });
    stores.push(reader, writer);
    return { reader, writer, clock, keyPrefix };
  };
  /** Looks `key` up until `done` holds (a change heard is applied when its message arrives), at most 5 s. */
  const lookUpUntil = async (store: RedisKeyStore, key: string, done: (found: Awaited<ReturnType<RedisKeyStore['findByHash']>>) => boolean) => {
    const giveUp = Date.now() + 5000;
    for (;;) {
      const found = await store.findByHash(hashApiKey(key));
      if (done(found) || Date.now() > giveUp) return found;
      await new Promise((r) => setTimeout(r, 10));
    }
  };

  it('serves a looked-up key from memory for 5 s by default, without asking Redis; at 5 s it reads Redis again', async () => {
    // No subscription: the revocation's message is not heard, so only the TTL ends the entry.
    const { reader, writer, clock } = pair({ subscribe: false });
    await expectRevocationSeenAt(reader, writer, clock, 5000, 'acct_c');
  });

  it('with cacheTtlMs 0 every lookup reads Redis', async () => {
    const { reader, writer } = pair({ subscribe: false, cacheTtlMs: 0 });
    const { key, record } = await writer.createKey({ accountId: 'acct_z', plan: 'p' });
    expect((await reader.findByHash(hashApiKey(key)))?.key.revokedAt).toBeNull();
    await writer.revokeKey(record.id);
    expect((await reader.findByHash(hashApiKey(key)))?.key.revokedAt).toBeTypeOf('string');
  });

  it('subscribes by itself at its first lookup: a key revoked or rotated elsewhere is dropped from its memory within the TTL', async () => {
    const { reader, writer } = pair();
    const revoked = await writer.createKey({ accountId: 'acct_r', plan: 'p' });
    const rotated = await writer.createKey({ accountId: 'acct_r', plan: 'p' });
    // The first lookup subscribes; once subscribed (a (re)subscription empties the cache), the keys are remembered.
    expect(await reader.findByHash(hashApiKey('never issued'))).toBeUndefined();
    await reader.listening();
    expect((await reader.findByHash(hashApiKey(revoked.key)))?.key.revokedAt).toBeNull();
    expect((await reader.findByHash(hashApiKey(rotated.key)))?.key.replacedBy ?? null).toBeNull();
    await writer.revokeKey(revoked.record.id);
    await writer.rotateKey(rotated.record.id, 60_000);
    // The reader's clock has not moved: only the messages can make it read Redis again.
    expect((await lookUpUntil(reader, revoked.key, (found) => Boolean(found?.key.revokedAt)))?.key.revokedAt).toBeTypeOf('string');
    expect((await lookUpUntil(reader, rotated.key, (found) => Boolean(found?.key.replacedBy)))?.key.replacedBy).toBeTypeOf('string');
  });

  it('an account changed elsewhere drops that account\'s keys from memory and keeps other accounts\' keys', async () => {
    const { reader, writer, keyPrefix } = pair();
    const mine = await writer.createKey({ accountId: 'acct_m', plan: 'p' });
    const sibling = await writer.createKey({ accountId: 'acct_m', plan: 'p' });
    const other = await writer.createKey({ accountId: 'acct_o', plan: 'p' });
    await reader.listening(); // before the lookups: a (re)subscription empties the cache
    for (const { key } of [mine, sibling, other]) expect((await reader.findByHash(hashApiKey(key)))?.account.status).toBe('active');
    // The other account's record changed behind every store's back (no message): the reader keeps
    // serving what it remembers for it, which shows whether the account event dropped it too.
    const [otherRecordKey] = await shared.redis.keys(`${keyPrefix}:*:key:${other.record.id}`);
    await shared.redis.set(otherRecordKey!, JSON.stringify({ ...other.record, label: 'changed behind its back' }));
    await writer.setAccountStatus('acct_m', 'suspended');
    expect((await lookUpUntil(reader, mine.key, (found) => found?.account.status === 'suspended'))?.account.status).toBe('suspended');
    expect((await reader.findByHash(hashApiKey(sibling.key)))?.account.status).toBe('suspended');
    expect((await reader.findByHash(hashApiKey(other.key)))?.key.label).toBe(other.record.label);
  });

  it('a new key made with revokeOthers drops the account\'s other keys from memory', async () => {
    const { reader, writer } = pair();
    const old = await writer.createKey({ accountId: 'acct_n', plan: 'p' });
    await reader.listening(); // before the lookup: a (re)subscription empties the cache
    expect((await reader.findByHash(hashApiKey(old.key)))?.key.revokedAt).toBeNull();
    await writer.createKey({ accountId: 'acct_n', plan: 'p', revokeOthers: true });
    expect((await lookUpUntil(reader, old.key, (found) => Boolean(found?.key.revokedAt)))?.key.revokedAt).toBeTypeOf('string');
  });
});
