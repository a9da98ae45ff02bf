import { afterEach, describe, expect, it, vi } from 'vitest';
import { MemoryConcurrencyStore, RedisConcurrencyStore } from '../../src/core/limits/concurrency.js';
import type { RedisClient } from '../../src/core/redis.js';
import { redisTopologies, useRedisTopology } from '../helpers/redis-topologies.js';

// The account concurrency slots' own rules, with an injected clock: a Redis lease is renewed every
// third of its length (10 000 ms by default, so every 3 333 ms; never more often than every
// 100 ms), a lease found lapsed is reported once and no longer renewed, and a release Redis did
// not get is retried 100, 200, 400, 800 ms then every 1 000 ms apart until the lease would have
// lapsed by itself (docs/limits.md; RedisConcurrencyOptions). Redis is a real redis-server; only
// the timers and Date are fake, so each renewal and retry happens at a time the test names.

describe('MemoryConcurrencyStore', () => {
  it('gives at most `limit` slots per account; a release frees one', async () => {
    const store = new MemoryConcurrencyStore();
    const a = await store.acquire('acct', 2);
    const b = await store.acquire('acct', 2);
    expect(a && b).toBeDefined();
    expect(await store.acquire('acct', 2)).toBeUndefined();
    expect(await store.acquire('other', 2)).toBeDefined();
    expect(await store.inUse('acct')).toBe(2);
    await a!.release();
    expect(await store.inUse('acct')).toBe(1);
  });

  it('a release sent again, after the account\'s slots went to a new holder, frees nothing of the new holder\'s', async () => {
    const store = new MemoryConcurrencyStore();
    const first = (await store.acquire('acct', 1))!;
    await first.release();
    const second = await store.acquire('acct', 1);
    expect(second).toBeDefined();
    await first.release(); // late duplicate
    expect(await store.inUse('acct')).toBe(1);
    expect(await store.acquire('acct', 1)).toBeUndefined();
  });
});

describe('RedisConcurrencyStore: renewal, loss and release, by the clock', () => {
  const shared = useRedisTopology(redisTopologies[0]!);
  let n = 0;
  afterEach(() => {
    vi.useRealTimers();
    vi.restoreAllMocks();
  });

  /** A client of its own (a spy on it sees only this test's commands), with fake timers and Date from now on. */
  async function setUp() {
    const redis = await shared.connect();
    const evals = vi.spyOn(redis, 'eval');
    const zrems = vi.spyOn(redis, 'zrem');
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'setTimeout', 'clearTimeout', 'Date'] });
    const renewals = () => evals.mock.calls.filter(([script]) => String(script).includes('ZSCORE')).length;
    return { redis, evals, zrems, renewals, prefix: `cs${++n}` };
  }

  it('renews every third of the default 10 000 ms lease: at 3 333 ms, not before', async () => {
    const { redis, renewals, prefix } = await setUp();
    const lease = (await new RedisConcurrencyStore(redis, prefix).acquire('acct', 1))!;
    vi.advanceTimersByTime(3332);
    expect(renewals()).toBe(0);
    vi.advanceTimersByTime(1);
    expect(renewals()).toBe(1);
    vi.advanceTimersByTime(3333);
    expect(renewals()).toBe(2);
    await lease.release();
    vi.advanceTimersByTime(10_000);
    expect(renewals()).toBe(2); // released: no more renewals
  });

  it('renewMs when given; never more often than every 100 ms', async () => {
    const { redis, renewals, prefix } = await setUp();
    const given = (await new RedisConcurrencyStore(redis, prefix, { leaseMs: 10_000, renewMs: 500 }).acquire('a', 1))!;
    vi.advanceTimersByTime(1000);
    expect(renewals()).toBe(2);
    await given.release();
    const short = (await new RedisConcurrencyStore(redis, prefix, { leaseMs: 150 }).acquire('b', 1))!;
    vi.advanceTimersByTime(99);
    expect(renewals()).toBe(2);
    vi.advanceTimersByTime(1);
    expect(renewals()).toBe(3);
    await short.release();
  });

  it('a lease found lapsed is reported once, with its account, and no longer renewed', async () => {
    const { redis, evals, renewals, prefix } = await setUp();
    const lost: string[] = [];
    const store = new RedisConcurrencyStore(redis, prefix, { leaseMs: 3000, onLeaseLost: (account) => lost.push(account) });
    const lease = (await store.acquire('acct', 1))!;
    await shared.redis.del(`${prefix}:concurrency:acct`); // the slot lapsed while its holder was away
    vi.advanceTimersByTime(1000);
    await evals.mock.results.at(-1)!.value; // the renewal's answer: 0
    expect(lost).toEqual(['acct']);
    vi.advanceTimersByTime(5000);
    expect(renewals()).toBe(1);
    expect(lost).toEqual(['acct']);
    await lease.release();
  });

  it('a lapsed lease with no onLeaseLost stops renewing, and nothing throws', async () => {
    const { redis, evals, renewals, prefix } = await setUp();
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const lease = (await new RedisConcurrencyStore(redis, prefix, { leaseMs: 3000 }).acquire('acct', 1))!;
      await shared.redis.del(`${prefix}:concurrency:acct`);
      vi.advanceTimersByTime(1000);
      await evals.mock.results.at(-1)!.value;
      // An unhandled rejection is reported after the microtasks run out: let a real turn pass.
      await new Promise((r) => setImmediate(r));
      vi.advanceTimersByTime(5000);
      expect(renewals()).toBe(1);
      expect(unhandled).toEqual([]);
      await lease.release();
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('a release Redis got is sent once', async () => {
    const { redis, zrems, prefix } = await setUp();
    const store = new RedisConcurrencyStore(redis, prefix, { leaseMs: 3000 });
    await (await store.acquire('acct', 1))!.release();
    await vi.advanceTimersByTimeAsync(5000);
    expect(zrems).toHaveBeenCalledTimes(1);
    expect(await store.inUse('acct')).toBe(0);
  });

  it('a release Redis did not get is retried 100, 200, 400, 800, then 1 000 ms apart, while the lease has not lapsed', async () => {
    const { redis, zrems, prefix } = await setUp();
    const store = new RedisConcurrencyStore(redis, prefix, { leaseMs: 4500 });
    const lease = (await store.acquire('acct', 1))!;
    const start = Date.now();
    const at: number[] = [];
    zrems.mockImplementation(async () => {
      at.push(Date.now() - start);
      throw new Error('Connection is closed.');
    });
    await lease.release(); // resolves at once: the retries go on in the background
    expect(at).toEqual([0]);
    await vi.advanceTimersByTimeAsync(10_000);
    // 4 500 would be the lease's own end: no attempt then.
    expect(at).toEqual([0, 100, 300, 700, 1500, 2500, 3500]);
  });

  it('the retries stop at the first one Redis gets', async () => {
    const { redis, zrems, prefix } = await setUp();
    const store = new RedisConcurrencyStore(redis, prefix, { leaseMs: 10_000 });
    const lease = (await store.acquire('acct', 1))!;
    zrems.mockRejectedValueOnce(new Error('Connection is closed.')).mockRejectedValueOnce(new Error('Connection is closed.'));
    await lease.release(); // the first attempt, at 0: fails
    await vi.advanceTimersByTimeAsync(300); // the retries at 100 (fails) and 300 (sent to Redis)
    expect(zrems).toHaveBeenCalledTimes(3);
    // Redis's answer comes over the socket, in real time: wait for it before the fake clock moves on
    // (moving it 1 s first would time the command out).
    await zrems.mock.results[2]!.value;
    await vi.advanceTimersByTimeAsync(10_000);
    expect(zrems).toHaveBeenCalledTimes(3);
    expect(await store.inUse('acct')).toBe(0);
  });
});
