import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { ApiError } from '../../src/core/errors.js';
import { ConcurrencyLimiter } from '../../src/core/limits/concurrency-limiter.js';
import type { ConcurrencyStore } from '../../src/core/limits/concurrency.js';
import { Insurance } from '../../src/core/limits/insurance.js';
import { PlanEnforcer } from '../../src/core/limits/plan-enforcer.js';
import type { Plans } from '../../src/core/limits/plans.js';
import { connectRedis, type RedisClient } from '../../src/core/redis.js';
import { neverSent, PendingUsage } from '../../src/core/limits/pending-usage.js';
import { QuotaLimiter } from '../../src/core/limits/quota-limiter.js';
import { MemoryQuotaStore, type QuotaStore } from '../../src/core/limits/quota-store.js';
import type { UsageMeter } from '../../src/core/limits/usage-meter.js';

// What the limits do while Redis is away, alone and in memory: the fallback between the shared
// store and this instance's (Insurance), and the writes kept for Redis's return (PendingUsage).
// Expected values come from docs/limits.md's rules (each instance's share is 1/n of a limit, at
// least 1; fail-closed answers 503 with Retry-After 5; nothing pending is lost or sent twice).

/** Stores that record every write they are sent, and fail the ones `fail` picks. */
function recordingStores(fail: (call: string) => boolean = () => false) {
  const calls: string[] = [];
  const record = async (call: string) => {
    calls.push(call);
    if (fail(call)) throw new Error(`lost: ${call}`);
  };
  const quotas: QuotaStore = {
    charge: async () => true,
    refund: (key, cost, op) => record(`refund ${key} ${cost} ${op}`),
    adjust: (key, delta, ttl, op) => record(`adjust ${key} ${delta} ttl=${ttl} op=${op ? 'yes' : 'no'}`),
    used: async () => 0,
  };
  const meter: UsageMeter = {
    add: (accountId, month, megapixels, images, op) => record(`usage ${accountId} ${month} ${megapixels} MP ${images} images op=${op}`),
    get: async (_accountId, month) => ({ month, images: 0, megapixels: 0 }),
  };
  return { calls, quotas, meter };
}

describe('PendingUsage: what Redis has not heard yet', () => {
  it('is empty at first, and again once charges and refunds of a key sum to nothing', () => {
    const pending = new PendingUsage();
    expect(pending.empty).toBe(true);
    pending.addQuota('q:a', 2);
    expect(pending.empty).toBe(false);
    pending.addQuota('q:a', -2);
    expect(pending.empty).toBe(true);
    pending.addUsage('a', '2026-05', 1.5);
    expect(pending.empty).toBe(false);
    const writes = new PendingUsage();
    writes.inDoubt('op1', { kind: 'refund', key: 'q:a', cost: 1 });
    expect(writes.empty).toBe(false);
  });

  it('flush sends the quota sums per key and the usage sums per account and month, once each', async () => {
    const pending = new PendingUsage();
    pending.addQuota('q:a', 3);
    pending.addQuota('q:a', -1);
    pending.addQuota('q:b', 1);
    pending.addUsage('a', '2026-05', 1.25);
    pending.addUsage('a', '2026-05', 0.5);
    pending.addUsage('a', '2026-06', 2);
    pending.addUsage('b', '2026-05', 1);
    const { calls, quotas, meter } = recordingStores();
    await pending.flush(quotas, meter, 86_400);
    expect(calls.map((c) => c.replace(/op=[0-9a-f-]{36}/, 'op=uuid')).sort()).toEqual(
      [
        'adjust q:a 2 ttl=86400 op=yes',
        'adjust q:b 1 ttl=86400 op=yes',
        'usage a 2026-05 1.75 MP 2 images op=uuid',
        'usage a 2026-06 2 MP 1 images op=uuid',
        'usage b 2026-05 1 MP 1 images op=uuid',
      ].sort(),
    );
    expect(pending.empty).toBe(true);
    calls.length = 0;
    await pending.flush(quotas, meter, 86_400);
    expect(calls).toEqual([]);
  });

  it('a write in doubt is retried as it is, under its own op; a refund as a refund', async () => {
    const pending = new PendingUsage();
    pending.inDoubt('op-refund', { kind: 'refund', key: 'q:a', cost: 2 });
    pending.inDoubt('op-usage', { kind: 'usage', accountId: 'a', month: '2026-05', megapixels: 3, images: 1 });
    const { calls, quotas, meter } = recordingStores();
    await pending.flush(quotas, meter, 60);
    expect(calls).toEqual(['refund q:a 2 op-refund', 'usage a 2026-05 3 MP 1 images op=op-usage']);
    expect(pending.empty).toBe(true);
  });

  it('what fails stays pending, under the same op, and is sent by the next flush; what went is not sent again', async () => {
    const pending = new PendingUsage();
    pending.inDoubt('op-1', { kind: 'refund', key: 'q:a', cost: 1 });
    pending.inDoubt('op-2', { kind: 'refund', key: 'q:b', cost: 1 });
    let redisDown = true;
    const first = recordingStores((call) => redisDown && call.includes('q:b'));
    await expect(pending.flush(first.quotas, first.meter, 60)).rejects.toThrow('lost: refund q:b 1 op-2');
    expect(first.calls).toEqual(['refund q:a 1 op-1', 'refund q:b 1 op-2']);
    expect(pending.empty).toBe(false);
    redisDown = false;
    const second = recordingStores();
    await pending.flush(second.quotas, second.meter, 60);
    expect(second.calls).toEqual(['refund q:b 1 op-2']);
    expect(pending.empty).toBe(true);
  });

  it('a quota sum that failed to send keeps its op: the retry cannot apply twice', async () => {
    const pending = new PendingUsage();
    pending.addQuota('q:a', 4);
    const ops: (string | undefined)[] = [];
    let fail = true;
    const quotas: QuotaStore = {
      charge: async () => true,
      refund: async () => {},
      adjust: async (_key, _delta, _ttl, op) => {
        ops.push(op);
        if (fail) throw new Error('timeout');
      },
      used: async () => 0,
    };
    const { meter } = recordingStores();
    await expect(pending.flush(quotas, meter, 60)).rejects.toThrow('timeout');
    fail = false;
    await pending.flush(quotas, meter, 60);
    expect(ops).toHaveLength(2);
    expect(ops[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(ops[1]).toBe(ops[0]);
  });

  it('one flush at a time: a second call while one runs shares it', async () => {
    const pending = new PendingUsage();
    pending.inDoubt('op-1', { kind: 'refund', key: 'q:a', cost: 1 });
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const sent: string[] = [];
    const quotas: QuotaStore = {
      charge: async () => true,
      refund: async (_key, _cost, op) => {
        sent.push(op);
        await gate;
      },
      adjust: async () => {},
      used: async () => 0,
    };
    const { meter } = recordingStores();
    const a = pending.flush(quotas, meter, 60);
    const b = pending.flush(quotas, meter, 60);
    expect(b).toBe(a);
    release();
    await Promise.all([a, b]);
    expect(sent).toEqual(['op-1']);
    // Once over, a new flush starts afresh.
    pending.inDoubt('op-2', { kind: 'refund', key: 'q:a', cost: 1 });
    await pending.flush(quotas, meter, 60);
    expect(sent).toEqual(['op-1', 'op-2']);
  });

  it('keeps at most maxInDoubt writes: the newest past it are dropped and counted; a known op is replaced, not dropped', async () => {
    const pending = new PendingUsage(2);
    pending.inDoubt('op-1', { kind: 'refund', key: 'q:a', cost: 1 });
    pending.inDoubt('op-2', { kind: 'refund', key: 'q:a', cost: 2 });
    pending.inDoubt('op-3', { kind: 'refund', key: 'q:a', cost: 3 });
    expect(pending.dropped).toBe(1);
    pending.inDoubt('op-2', { kind: 'refund', key: 'q:a', cost: 5 });
    expect(pending.dropped).toBe(1);
    const { calls, quotas, meter } = recordingStores();
    await pending.flush(quotas, meter, 60);
    expect(calls).toEqual(['refund q:a 1 op-1', 'refund q:a 5 op-2']);
  });

  it('neverSent: only ioredis\'s refusal to queue a command offline means Redis cannot have applied it', () => {
    expect(neverSent(new Error("Stream isn't writeable and enableOfflineQueue options is false"))).toBe(true);
    expect(neverSent(new Error('Command timed out'))).toBe(false);
    expect(neverSent(new Error('Connection is closed.'))).toBe(false);
    expect(neverSent('enableOfflineQueue options is false')).toBe(false);
  });
});

describe('Insurance: the shared store, or this instance\'s share while it fails', () => {
  const boom = new Error('ECONNREFUSED');

  it('share: 1/n of a limit, rounded down, at least 1', () => {
    const three = new Insurance('insurance', 3, true);
    expect(three.share(10)).toBe(3);
    expect(three.share(9)).toBe(3);
    expect(three.share(2)).toBe(1);
    expect(three.share(0)).toBe(1);
    expect(new Insurance('insurance', 1, true).share(7)).toBe(7);
  });

  it('enabled only in insurance mode', () => {
    expect(new Insurance('insurance', 2, true).enabled).toBe(true);
    expect(new Insurance('fail-closed', 2, true).enabled).toBe(false);
  });

  it('the shared store answering: its value, no fallback, no failure heard', async () => {
    const heard: unknown[] = [];
    const result = await new Insurance('insurance', 2, true).run('quota store', undefined, async () => 'shared', async () => 'memory', (e) => heard.push(e));
    expect(result).toEqual({ value: 'shared', fellBack: false });
    expect(heard).toEqual([]);
  });

  it('insurance: the shared store failing, the fallback answers; the failure is heard first', async () => {
    const order: string[] = [];
    const result = await new Insurance('insurance', 2, true).run(
      'quota store',
      undefined,
      async () => {
        throw boom;
      },
      async () => {
        order.push('fallback');
        return 'memory';
      },
      (e) => order.push(`heard ${(e as Error).message}`),
    );
    expect(result).toEqual({ value: 'memory', fellBack: true });
    expect(order).toEqual(['heard ECONNREFUSED', 'fallback']);
  });

  it('fail-closed: 503 service_unavailable, Retry-After 5, naming what cannot be reached; the fallback never runs', async () => {
    let fellBack = false;
    const heard: unknown[] = [];
    const error = await new Insurance('fail-closed', 2, true)
      .run(
        'rate store',
        undefined,
        async () => {
          throw boom;
        },
        async () => {
          fellBack = true;
          return 0;
        },
        (e) => heard.push(e),
      )
      .catch((e: unknown) => e as ApiError);
    expect(error).toBeInstanceOf(ApiError);
    expect([error.status, error.code, error.headers]).toEqual([503, 'service_unavailable', { 'retry-after': '5' }]);
    expect(error.message).toBe('The rate store cannot be reached.');
    expect(error.cause).toBe(boom);
    expect(fellBack).toBe(false);
    expect(heard).toEqual([boom]);
  });

  it('limits in memory (nothing shared): a failure is passed on as it is, unheard, with no fallback', async () => {
    const heard: unknown[] = [];
    let fellBack = false;
    const run = new Insurance('insurance', 2, false).run(
      'quota store',
      undefined,
      async () => {
        throw boom;
      },
      async () => {
        fellBack = true;
        return 0;
      },
      (e) => heard.push(e),
    );
    await expect(run).rejects.toBe(boom);
    expect(fellBack).toBe(false);
    expect(heard).toEqual([]);
  });

  it('an aborted request: its abort reason, not a 503 nor the fallback', async () => {
    const controller = new AbortController();
    const reason = new Error('client went away');
    let fellBack = false;
    const heard: unknown[] = [];
    const run = new Insurance('fail-closed', 2, true).run(
      'quota store',
      controller.signal,
      async () => {
        controller.abort(reason);
        throw boom;
      },
      async () => {
        fellBack = true;
        return 0;
      },
      (e) => heard.push(e),
    );
    await expect(run).rejects.toBe(reason);
    expect(fellBack).toBe(false);
    expect(heard).toEqual([]);
    const insured = new Insurance('insurance', 2, true).run('quota store', AbortSignal.abort(reason), async () => {
      throw boom;
    }, async () => 1);
    await expect(insured).rejects.toBe(reason);
  });
});

describe('QuotaLimiter while the shared quota store fails', () => {
  const may = new Date('2026-05-10T12:00:00.000Z');
  const images = { unit: 'images' as const, amount: 10 };
  const refusedOffline = () => new Error("Stream isn't writeable and enableOfflineQueue options is false");

  /** A shared store that fails (or not) as `state.failing` says, with the errors `state.error` makes. */
  function sharedStore(state: { failing: boolean; error: () => Error }) {
    const memory = new MemoryQuotaStore();
    const calls: string[] = [];
    const store: QuotaStore = {
      charge: async (key, cost, limit, ttl, op) => {
        calls.push(`charge ${key} ${cost}/${limit} ttl=${ttl} op=${op}`);
        if (state.failing) throw state.error();
        return memory.charge(key, cost, limit);
      },
      refund: async (key, cost, op) => {
        calls.push(`refund ${key} ${cost} op=${op}`);
        if (state.failing) throw state.error();
        return memory.refund(key, cost);
      },
      adjust: async (key, delta) => memory.adjust(key, delta),
      used: (key) => memory.used(key),
    };
    return { store, calls };
  }

  function limiter(mode: 'insurance' | 'fail-closed', state: { failing: boolean; error: () => Error }) {
    const shared = sharedStore(state);
    const fallback = new MemoryQuotaStore();
    const pending = new PendingUsage();
    let sharedWrites = 0;
    const quota = new QuotaLimiter(shared.store, fallback, new Insurance(mode, 2, true), pending, () => sharedWrites++);
    return { quota, shared, fallback, pending, sharedWrites: () => sharedWrites };
  }

  it('Redis there: charged under the op, for 32 days, against the whole quota; the month is in the key; a shared write is reported', async () => {
    const { quota, shared, sharedWrites, pending } = limiter('insurance', { failing: false, error: () => new Error('x') });
    const refund = await quota.reserve('acct', images, 1, may, 1, 'op-1');
    expect(shared.calls).toEqual([`charge acct:2026-05 1/10 ttl=${32 * 86400} op=op-1`]);
    expect(sharedWrites()).toBe(1);
    expect(await quota.used('acct', may)).toBe(1);
    await refund();
    expect(shared.calls.at(-1)).toBe('refund acct:2026-05 1 op=op-1');
    expect(await quota.used('acct', may)).toBe(0);
    expect(pending.empty).toBe(true);
  });

  it('insurance: charged to this instance\'s share (1/2 of 10 = 5), kept pending for Redis; a refund takes it back from both', async () => {
    const state = { failing: true, error: () => new Error('Connection is closed.') };
    const { quota, fallback, pending, sharedWrites } = limiter('insurance', state);
    const refunds = [];
    for (let i = 0; i < 5; i++) refunds.push(await quota.reserve('acct', images, 1, may, 1, `op-${i}`));
    expect(await fallback.used('acct:2026-05')).toBe(5);
    expect(sharedWrites()).toBe(0);
    const refused = await quota.reserve('acct', images, 1, may, 1, 'op-5').catch((e: unknown) => e as ApiError);
    expect(refused).toMatchObject({ code: 'quota_exceeded', status: 429 });
    await refunds[0]!();
    expect(await fallback.used('acct:2026-05')).toBe(4);
    // What Redis hears when it is back: the 4 charged (the 5th refused, one refunded), and one
    // refund per charge whose reply was lost (each of the 6 sends, the refused one's too).
    state.failing = false;
    const { calls, quotas, meter } = recordingStores();
    await pending.flush(quotas, meter, 60);
    expect(calls.filter((c) => c.startsWith('adjust'))).toEqual(['adjust acct:2026-05 4 ttl=60 op=yes']);
    expect(calls.filter((c) => c.startsWith('refund')).sort()).toEqual(
      ['op-0', 'op-1', 'op-2', 'op-3', 'op-4', 'op-5'].map((op) => `refund acct:2026-05 1 ${op}`),
    );
  });

  it('a charge ioredis never sent leaves no refund in doubt', async () => {
    const { quota, pending } = limiter('insurance', { failing: true, error: refusedOffline });
    await quota.reserve('acct', images, 1, may, 1, 'op-1');
    const { calls, quotas, meter } = recordingStores();
    await pending.flush(quotas, meter, 60);
    expect(calls).toEqual(['adjust acct:2026-05 1 ttl=60 op=yes']);
  });

  it('fail-closed: 503, nothing charged anywhere, and the lost charge\'s refund kept for Redis', async () => {
    const { quota, fallback, pending } = limiter('fail-closed', { failing: true, error: () => new Error('Command timed out') });
    const error = await quota.reserve('acct', images, 1, may, 1, 'op-1').catch((e: unknown) => e as ApiError);
    expect(error).toMatchObject({ code: 'service_unavailable', status: 503, message: 'The quota store cannot be reached.' });
    expect(await fallback.used('acct:2026-05')).toBe(0);
    const { calls, quotas, meter } = recordingStores();
    await pending.flush(quotas, meter, 60);
    expect(calls).toEqual(['refund acct:2026-05 1 op-1']);
  });

  it('a refund Redis misses is kept, under the charge\'s op, for when it is back', async () => {
    const state = { failing: false, error: () => new Error('Command timed out') };
    const { quota, pending } = limiter('fail-closed', state);
    const refund = await quota.reserve('acct', { unit: 'megapixels', amount: 10 }, 2_500_000, may, 1, 'op-1');
    state.failing = true;
    await refund();
    const { calls, quotas, meter } = recordingStores();
    await pending.flush(quotas, meter, 60);
    expect(calls).toEqual(['refund acct:2026-05 3 op-1']);
  });
});

describe('PlanEnforcer with its Redis unreachable (a client of a closed loopback port)', () => {
  const PLANS: Plans = {
    p: { requestsPerMinute: 4, maxConcurrent: 2, monthlyQuota: { unit: 'images', amount: 4 } },
  };
  const may = new Date('2026-05-10T12:00:00.000Z');
  const clients: RedisClient[] = [];
  const unreachable = () => {
    // Port 1 on loopback: nothing listens, so every command fails at once (no offline queue).
    const redis = connectRedis('redis://127.0.0.1:1', { onStateChange: () => {} });
    clients.push(redis);
    return redis;
  };
  /**
   * A client (never connected) whose scripts go unanswered, as a timed-out command does, until
   * `answer()`; then each answers 1. `sent` keeps every script call's arguments.
   */
  const scriptedClient = (failure = () => new Error('Command timed out')) => {
    const redis = new Redis({ lazyConnect: true, enableOfflineQueue: false, autoResendUnfulfilledCommands: false });
    clients.push(redis);
    const sent: (string | number)[][] = [];
    let answering = false;
    redis.eval = (async (...args: (string | number)[]) => {
      sent.push(args);
      if (!answering) throw failure();
      return 1;
    }) as never;
    return { redis, sent, answer: () => (answering = true) };
  };
  afterEach(() => {
    for (const client of clients.splice(0)) client.disconnect();
  });
  const codeOf = (promise: Promise<unknown>) =>
    promise.then(
      () => 'ok',
      (error: unknown) => (error instanceof ApiError ? `${error.status} ${error.code} retry-after=${error.headers['retry-after']}` : String(error)),
    );
  const failure = (promise: Promise<unknown>) => promise.then(() => undefined, (error: unknown) => error as ApiError);

  it('fail-closed: admission, the quota and the standing answer 503 (Retry-After 5), never 429 or 401; usage is kept for later', async () => {
    const limits = new PlanEnforcer({ plans: PLANS, redis: unreachable(), redisFailureMode: 'fail-closed', validate: false });
    expect(await codeOf(limits.admit('a', 'p'))).toBe('503 service_unavailable retry-after=5');
    expect(await codeOf(limits.reserveQuota('a', 'p', 1, may))).toBe('503 service_unavailable retry-after=5');
    expect(await failure(limits.standing('a', 'p', may))).toMatchObject({ status: 503, message: 'The usage store cannot be reached.', headers: { 'retry-after': '5' } });
    // A plan with no concurrency cap reaches the rate limiter, which says what failed.
    const open = new PlanEnforcer({ plans: { o: { requestsPerMinute: 5 } }, redis: unreachable(), validate: false });
    expect(await failure(open.admit('a', 'o'))).toMatchObject({ status: 503, code: 'service_unavailable', message: 'The rate limiter cannot be reached.', headers: { 'retry-after': '5' } });
    await open.close();
    expect(limits.hasPendingUsage).toBe(false);
    await limits.recordUsage('a', 2_000_000, may);
    expect(limits.hasPendingUsage).toBe(true);
    await limits.close();
  });

  it('a usage record whose reply was lost is sent again when Redis answers, under the same op, with its megapixels', async () => {
    // Scripts time out (sent, unanswered), then answer: what it was sent is recorded.
    const { redis, sent: calls, answer } = scriptedClient();
    const limits = new PlanEnforcer({ plans: PLANS, redis, validate: false });
    await limits.recordUsage('a', 2_500_000, may, 'op-usage');
    expect(limits.hasPendingUsage).toBe(true);
    answer();
    await limits.flushPending();
    const sent = calls.map((args) => args.slice(2));
    expect(limits.hasPendingUsage).toBe(false);
    expect(sent).toHaveLength(2);
    expect(sent[1]).toEqual(sent[0]);
    // KEYS: usage hash, the op's record, the days hash, under the default prefix `bgcut`; ARGV: images 1, 2.5 MP.
    expect(sent[0]!.slice(0, 3)).toEqual([expect.stringMatching(/^bgcut:/), expect.stringMatching(/^bgcut:.*:op:op-usage$/), expect.stringMatching(/^bgcut:/)]);
    expect(sent[0]!.slice(3, 5).map(Number)).toEqual([1, 2.5]);
    await limits.close();
  });

  it('usage records ioredis never sent (refused offline) are summed: one write of their images and megapixels, under an op of its own', async () => {
    const { redis, sent, answer } = scriptedClient(() => new Error("Stream isn't writeable and enableOfflineQueue options is false"));
    const limits = new PlanEnforcer({ plans: PLANS, redis, validate: false });
    await limits.recordUsage('a', 1_500_000, may, 'op-a');
    await limits.recordUsage('a', 2_500_000, may, 'op-b');
    expect(limits.hasPendingUsage).toBe(true);
    answer();
    await limits.flushPending();
    expect(limits.hasPendingUsage).toBe(false);
    const flushed = sent.slice(2).map((args) => args.slice(2));
    expect(flushed).toHaveLength(1);
    // KEYS: usage hash, op record, days hash; ARGV: 2 images, 4 MP.
    expect(String(flushed[0]![1])).not.toMatch(/:op:op-[ab]$/);
    expect(flushed[0]!.slice(3, 5).map(Number)).toEqual([2, 4]);
    await limits.close();
  });

  it('a quota charge Redis answers also sends what is pending', async () => {
    const { redis, sent, answer } = scriptedClient();
    const limits = new PlanEnforcer({ plans: PLANS, redis, validate: false });
    await limits.recordUsage('a', 1_000_000, may, 'op-lost');
    answer();
    await limits.reserveQuota('a', 'p', 1_000_000, may);
    await expect.poll(() => limits.hasPendingUsage).toBe(false);
    expect(sent.filter((args) => String(args[3]).endsWith(':op:op-lost'))).toHaveLength(2);
    await limits.close();
  });

  it('without Redis, a local usage store that fails: recordUsage rejects with its error, nothing kept pending', async () => {
    const broken = new Error('EACCES: usage file');
    const usageStore = { charge: async () => true, refund: async () => {}, adjust: async () => {}, used: async () => 0, add: async () => Promise.reject(broken), get: async (_a: string, month: string) => ({ month, images: 0, megapixels: 0 }) };
    const limits = new PlanEnforcer({ plans: PLANS, usageStore });
    await expect(limits.recordUsage('a', 1_000_000, may)).rejects.toBe(broken);
    expect(limits.hasPendingUsage).toBe(false);
    await limits.close();
  });

  it('what is pending goes to Redis as soon as its client is ready again, under the keyPrefix; after close() the enforcer stops listening', async () => {
    const { redis, sent, answer } = scriptedClient();
    const limits = new PlanEnforcer({ plans: PLANS, redis, keyPrefix: 'shop', validate: false });
    await limits.recordUsage('a', 1_000_000, may, 'op-1');
    answer();
    redis.emit('ready');
    await expect.poll(() => limits.hasPendingUsage).toBe(false);
    expect(sent.map((args) => String(args[3]))).toEqual(['shop:{a:a}:op:op-1', 'shop:{a:a}:op:op-1']);
    await limits.close();
    expect(redis.listenerCount('ready')).toBe(0);
  });

  it('the next write Redis answers also sends what is pending, without waiting for a reconnect', async () => {
    const { redis, sent, answer } = scriptedClient();
    const limits = new PlanEnforcer({ plans: PLANS, redis, validate: false });
    await limits.recordUsage('a', 1_000_000, may, 'op-lost');
    answer();
    await limits.recordUsage('a', 1_000_000, may, 'op-next');
    await expect.poll(() => limits.hasPendingUsage).toBe(false);
    expect(sent.map((args) => String(args[3]).split(':op:')[1])).toEqual(['op-lost', 'op-next', 'op-lost']);
    await limits.close();
  });

  it('insurance with 2 instances: each serves half of every limit (rate 2 of 4, 1 of 2 slots, quota 2 of 4), and keeps the charges for Redis', async () => {
    const limits = new PlanEnforcer({ plans: PLANS, redis: unreachable(), redisFailureMode: 'insurance', insuranceInstances: 2, validate: false });
    // Requests in progress: one slot of the two.
    const first = await limits.admit('a', 'p');
    expect(await codeOf(limits.admit('a', 'p'))).toBe('429 concurrency_limited retry-after=1');
    await first.release();
    // Rate: the first admission took one point; one more, then 429.
    const second = await limits.admit('a', 'p');
    await second.release();
    const limited = await codeOf(limits.admit('a', 'p'));
    expect(limited).toMatch(/^429 rate_limited retry-after=\d+$/);
    // The seconds left in the insurance limiter's minute, started at the first admission.
    expect(Number(limited.split('=')[1])).toBeGreaterThanOrEqual(1);
    expect(Number(limited.split('=')[1])).toBeLessThanOrEqual(60);
    // Another account has its own allowance.
    await (await limits.admit('b', 'p')).release();
    // Quota: two images of four.
    await limits.reserveQuota('a', 'p', 1, may);
    const refund = await limits.reserveQuota('a', 'p', 1, may);
    expect(await codeOf(limits.reserveQuota('a', 'p', 1, may))).toMatch(/^429 quota_exceeded /);
    await refund();
    await limits.reserveQuota('a', 'p', 1, may);
    expect(limits.hasPendingUsage).toBe(true);
    await limits.close();
  });
});

describe('ConcurrencyLimiter while the shared concurrency store fails', () => {
  const failure = (promise: Promise<unknown>) => promise.then(() => undefined, (error: unknown) => error as ApiError);
  /** A store that records each acquire (account, limit, whether the signal came with it) and fails while `failing`. */
  function recordingStore(name: string, calls: string[], state = { failing: false }): ConcurrencyStore {
    return {
      acquire: async (accountId, limit, options) => {
        calls.push(`${name} ${accountId} ${limit} signal=${options?.signal ? 'yes' : 'no'}`);
        if (state.failing) throw new Error('ECONNREFUSED');
        return { release: async () => {} };
      },
      inUse: async () => (name === 'shared' ? 7 : 0),
    };
  }

  it('Redis there: the account\'s whole limit from the shared store, with the request\'s signal; inUse from the shared store', async () => {
    const calls: string[] = [];
    const limiter = new ConcurrencyLimiter(recordingStore('shared', calls), recordingStore('memory', calls), new Insurance('insurance', 3, true));
    expect(await limiter.acquire('a', 10, new AbortController().signal)).toBeDefined();
    expect(calls).toEqual(['shared a 10 signal=yes']);
    expect(await limiter.inUse('a')).toBe(7);
  });

  it('insurance with 3 instances: the shared store failing, this instance\'s memory store at a third of the limit, with the signal', async () => {
    const calls: string[] = [];
    const limiter = new ConcurrencyLimiter(recordingStore('shared', calls, { failing: true }), recordingStore('memory', calls), new Insurance('insurance', 3, true));
    expect(await limiter.acquire('a', 10, new AbortController().signal)).toBeDefined();
    expect(calls).toEqual(['shared a 10 signal=yes', 'memory a 3 signal=yes']);
  });

  it('fail-closed: 503 naming the concurrency store, and no slot from memory', async () => {
    const calls: string[] = [];
    const limiter = new ConcurrencyLimiter(recordingStore('shared', calls, { failing: true }), recordingStore('memory', calls), new Insurance('fail-closed', 3, true));
    expect(await failure(limiter.acquire('a', 10))).toMatchObject({ status: 503, code: 'service_unavailable', message: 'The concurrency store cannot be reached.' });
    expect(calls).toEqual(['shared a 10 signal=no']);
  });
});

