import { describe, expect, it } from 'vitest';
import { MemoryQuotaStore, RedisQuotaStore, type QuotaStore } from '../../src/core/limits/quota-store.js';
import { MemoryUsageMeter, monthOf, redisDailyUsageKey, RedisUsageMeter } from '../../src/core/limits/usage-meter.js';
import type { RedisClient } from '../../src/core/redis.js';
import { redisTopologies, useRedisTopology } from '../helpers/redis-topologies.js';

// The month's quota counters and usage records in Redis, read back with plain Redis commands.
// Expected values come from the stores' documented rules (docs/limits.md, the interfaces'
// comments): a charge never passes its limit, each operation applies once (a refund gives its
// charge back once, and one that comes first cancels the charge), nothing goes below 0, an
// operation is remembered for an hour, usage is kept 400 days (34 560 000 s) and dated by day.

const HOUR = 3600;
const DAYS_400 = 400 * 24 * 60 * 60;

/** The key's TTL was just set to `seconds`: at most that, and not more than a few seconds less on a busy box. */
async function expectTtl(redis: RedisClient, key: string, seconds: number): Promise<void> {
  const ttl = await redis.ttl(key);
  expect(ttl, `TTL of ${key}`).toBeLessThanOrEqual(seconds);
  expect(ttl, `TTL of ${key}`).toBeGreaterThan(seconds - 30);
}

describe.each(redisTopologies)('RedisQuotaStore on $name', (topology) => {
  const shared = useRedisTopology(topology);
  let n = 0;
  /** A store under a prefix of its own, and the raw keys of one counter. */
  const fresh = () => {
    const prefix = `qs${++n}`;
    const counter = 'acct:2026-11';
    return {
      store: new RedisQuotaStore(shared.redis, prefix),
      counter,
      quotaKey: `${prefix}:{q:${counter}}:quota`,
      opKey: (op: string) => `${prefix}:{q:${counter}}:op:${op}`,
    };
  };

  it('charges up to the limit exactly, and refuses what would pass it', async () => {
    const { store, counter } = fresh();
    expect(await store.charge(counter, 3, 5, HOUR, 'a')).toBe(true);
    expect(await store.charge(counter, 2, 5, HOUR, 'b')).toBe(true); // 5 of 5
    expect(await store.charge(counter, 1, 5, HOUR, 'c')).toBe(false);
    expect(await store.used(counter)).toBe(5);
  });

  it('a charge sent twice under one op applies once, and answers charged both times; its record lasts an hour', async () => {
    const { store, counter, opKey } = fresh();
    expect(await store.charge(counter, 2, 10, HOUR, 'op1')).toBe(true);
    expect(await store.charge(counter, 2, 10, HOUR, 'op1')).toBe(true);
    expect(await store.used(counter)).toBe(2);
    expect(await shared.redis.get(opKey('op1'))).toBe('charged');
    await expectTtl(shared.redis, opKey('op1'), HOUR);
  });

  it('charges without an op are each their own operation', async () => {
    const { store, counter } = fresh();
    await store.charge(counter, 1, 10, HOUR);
    await store.charge(counter, 1, 10, HOUR);
    await store.adjust(counter, 2, HOUR);
    await store.adjust(counter, 2, HOUR);
    expect(await store.used(counter)).toBe(6);
  });

  it('a refund gives its charge back once, however often it is sent', async () => {
    const { store, counter, opKey } = fresh();
    await store.charge(counter, 3, 10, HOUR, 'op1');
    await store.charge(counter, 2, 10, HOUR, 'op2');
    await store.refund(counter, 3, 'op1');
    await store.refund(counter, 3, 'op1');
    expect(await store.used(counter)).toBe(2);
    expect(await shared.redis.get(opKey('op1'))).toBe('refunded');
    await expectTtl(shared.redis, opKey('op1'), HOUR);
  });

  it('a refund that arrives before its charge keeps the charge from applying, and gives nothing back itself', async () => {
    const { store, counter } = fresh();
    await store.charge(counter, 4, 10, HOUR, 'other');
    await store.refund(counter, 3, 'early');
    expect(await store.used(counter)).toBe(4);
    expect(await store.charge(counter, 3, 10, HOUR, 'early')).toBe(false);
    expect(await store.used(counter)).toBe(4);
  });

  it('a refund never takes the counter below 0, and the counter keeps its expiry', async () => {
    const { store, counter, quotaKey } = fresh();
    await store.charge(counter, 3, 10, HOUR, 'op1');
    await store.adjust(counter, -2, HOUR, 'fix'); // 1 left
    await store.refund(counter, 3, 'op1');
    expect(await shared.redis.get(quotaKey)).toBe('0');
    await expectTtl(shared.redis, quotaKey, HOUR);
  });

  it('adjust adds without a limit, once per op, never below 0, and sets the counter\'s expiry', async () => {
    const { store, counter, quotaKey, opKey } = fresh();
    await store.adjust(counter, 7, 2 * HOUR, 'up');
    await store.adjust(counter, 7, 2 * HOUR, 'up');
    expect(await store.used(counter)).toBe(7);
    await expectTtl(shared.redis, quotaKey, 2 * HOUR);
    expect(await shared.redis.get(opKey('up'))).toBe('adjusted');
    await expectTtl(shared.redis, opKey('up'), HOUR);
    await store.adjust(counter, -10, 2 * HOUR, 'down');
    expect(await store.used(counter)).toBe(0);
    expect(await shared.redis.get(quotaKey)).toBe('0');
  });

  it('a counter never written reads 0; a prefix holding a brace is refused', async () => {
    const { store } = fresh();
    expect(await store.used('nobody:2026-11')).toBe(0);
    expect(() => new RedisQuotaStore(shared.redis, 'a{b')).toThrow(RangeError);
  });
});

describe('MemoryQuotaStore', () => {
  it('charges up to the limit exactly; refunds and adjustments never go below 0', async () => {
    const store: QuotaStore = new MemoryQuotaStore();
    expect(await store.used('k')).toBe(0);
    expect(await store.charge('k', 3, 5, 3600)).toBe(true);
    expect(await store.charge('k', 2, 5, 3600)).toBe(true);
    expect(await store.charge('k', 1, 5, 3600)).toBe(false);
    expect(await store.used('k')).toBe(5);
    await store.refund('k', 2, 'op');
    expect(await store.used('k')).toBe(3);
    await store.adjust('k', -9, 0);
    expect(await store.used('k')).toBe(0);
    await store.adjust('k', 4, 0);
    expect(await store.used('k')).toBe(4);
    expect(await store.used('other')).toBe(0);
  });
});

describe.each(redisTopologies)('RedisUsageMeter on $name', (topology) => {
  const shared = useRedisTopology(topology);
  let n = 0;
  const at = (iso: string) => () => new Date(iso);

  it('adds images and megapixels per account and month, once per op, kept 400 days', async () => {
    const prefix = `um${++n}`;
    const meter = new RedisUsageMeter(shared.redis, prefix, at('2026-11-20T10:00:00.000Z'));
    await meter.add('acct', '2026-11', 2.5, 1, 'op1');
    await meter.add('acct', '2026-11', 2.5, 1, 'op1'); // sent again: once
    await meter.add('acct', '2026-11', 0.75, 3, 'op2');
    await meter.add('acct', '2026-10', 1, 1, 'op3');
    await meter.add('other', '2026-11', 1, 1, 'op4');
    expect(await meter.get('acct', '2026-11')).toEqual({ month: '2026-11', images: 4, megapixels: 3.25 });
    expect(await meter.get('acct', '2026-10')).toEqual({ month: '2026-10', images: 1, megapixels: 1 });
    const total = `${prefix}:{a:acct}:usage:2026-11`;
    expect(await shared.redis.hgetall(total)).toEqual({ images: '4', megapixels: '3.25' });
    await expectTtl(shared.redis, total, DAYS_400);
    expect(await shared.redis.get(`${prefix}:{a:acct}:op:op1`)).toBe('recorded');
    await expectTtl(shared.redis, `${prefix}:{a:acct}:op:op1`, HOUR);
  });

  it('records without an op are each their own; images default to 1', async () => {
    const meter = new RedisUsageMeter(shared.redis, `um${++n}`, at('2026-11-20T10:00:00.000Z'));
    await meter.add('acct', '2026-11', 1);
    await meter.add('acct', '2026-11', 1);
    expect(await meter.get('acct', '2026-11')).toEqual({ month: '2026-11', images: 2, megapixels: 2 });
  });

  it('megapixels to 4 decimals: each record rounded, and the sum read back rounded', async () => {
    const meter = new RedisUsageMeter(shared.redis, `um${++n}`, at('2026-11-20T10:00:00.000Z'));
    await meter.add('acct', '2026-11', 0.123456, 1, 'a'); // 0.1235
    await meter.add('acct', '2026-11', 0.1, 1, 'b');
    await meter.add('acct', '2026-11', 0.2, 1, 'c');
    expect((await meter.get('acct', '2026-11')).megapixels).toBe(0.4235);
  });

  it('a month never written reads as 0 images, 0 megapixels', async () => {
    const meter = new RedisUsageMeter(shared.redis, `um${++n}`);
    expect(await meter.get('nobody', '2026-11')).toEqual({ month: '2026-11', images: 0, megapixels: 0 });
  });

  it('each record is also counted on its day, in that day\'s month\'s hash, kept 400 days', async () => {
    const prefix = `um${++n}`;
    let now = '2026-11-30T23:59:59.000Z';
    const meter = new RedisUsageMeter(shared.redis, prefix, () => new Date(now));
    await meter.add('acct', '2026-11', 1.5, 1, 'a');
    await meter.add('acct', '2026-11', 0.5, 2, 'b');
    // Charged in November, recorded just after midnight: November's total, December 1st's day.
    now = '2026-12-01T00:00:01.000Z';
    await meter.add('acct', '2026-11', 2, 1, 'c');
    const november = `${prefix}:{a:acct}:usage-days:2026-11`;
    const december = `${prefix}:{a:acct}:usage-days:2026-12`;
    expect(redisDailyUsageKey(prefix, 'acct', '2026-11')).toBe(november);
    expect(await shared.redis.hgetall(november)).toEqual({ '2026-11-30:images': '3', '2026-11-30:megapixels': '2' });
    expect(await shared.redis.hgetall(december)).toEqual({ '2026-12-01:images': '1', '2026-12-01:megapixels': '2' });
    await expectTtl(shared.redis, november, DAYS_400);
    expect(await meter.get('acct', '2026-11')).toEqual({ month: '2026-11', images: 4, megapixels: 4 });
    expect(await meter.get('acct', '2026-12')).toEqual({ month: '2026-12', images: 0, megapixels: 0 });
  });
});

describe('MemoryUsageMeter', () => {
  it('per account and month; images default to 1; megapixels to 4 decimals; get returns a copy', async () => {
    const meter = new MemoryUsageMeter();
    await meter.add('acct', '2026-11', 0.123456);
    await meter.add('acct', '2026-11', 0.2, 3);
    await meter.add('acct', '2026-10', 1);
    const november = await meter.get('acct', '2026-11');
    expect(november).toEqual({ month: '2026-11', images: 4, megapixels: 0.3235 });
    november.images = 99;
    expect(await meter.get('acct', '2026-11')).toEqual({ month: '2026-11', images: 4, megapixels: 0.3235 });
    expect(await meter.get('acct', '2026-10')).toEqual({ month: '2026-10', images: 1, megapixels: 1 });
    expect(await meter.get('other', '2026-11')).toEqual({ month: '2026-11', images: 0, megapixels: 0 });
  });

  it('monthOf: the calendar month in UTC', () => {
    expect(monthOf(new Date('2026-11-30T23:59:59.999Z'))).toBe('2026-11');
    expect(monthOf(new Date('2026-12-01T00:30:00.000+01:00'))).toBe('2026-11');
  });
});
