import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { connectRedis, type Plans } from '../src/core/index.js';
import type { ApiError } from '../src/core/errors.js';
import { PlanEnforcer } from '../src/core/limits/plan-enforcer.js';
import { startRedis, type RedisServer } from './helpers/redis-server.js';
import { startReplyDroppingProxy, type ReplyDroppingProxy } from './helpers/reply-dropping-proxy.js';

// A command that reached Redis but whose reply was lost (the 1 s command timeout fired, the
// connection dropped) has already been answered for: a 503, an insurance charge, a write kept to
// retry. Nothing may apply it a second time: not ioredis resending it after the reconnect, not the
// retry of what the enforcer kept.

const PLANS: Plans = { metered: { requestsPerMinute: 10_000, monthlyQuota: { unit: 'images', amount: 100 } } };
const quiet = { onStateChange: () => {} };
const ready = (redis: Redis) => (redis.status === 'ready' ? Promise.resolve() : new Promise<void>((r) => redis.once('ready', () => r())));

let server: RedisServer;
let proxy: ReplyDroppingProxy;
let direct: Redis;
const clients: Redis[] = [];
beforeAll(async () => {
  server = await startRedis();
  direct = connectRedis(server.url, quiet);
  await ready(direct);
});
afterEach(async () => {
  for (const c of clients.splice(0)) c.disconnect();
  await proxy?.close();
  await direct.flushall();
});
afterAll(async () => {
  direct?.disconnect();
  await server?.stop();
});

/** An enforcer whose Redis connection goes through the proxy, and one that reads Redis directly. */
async function enforcers(mode: 'fail-closed' | 'insurance' = 'fail-closed') {
  proxy = await startReplyDroppingProxy(server.port);
  const redis = connectRedis(proxy.url, quiet);
  clients.push(redis);
  await ready(redis);
  return { redis, enforcer: new PlanEnforcer({ plans: PLANS, redis, redisFailureMode: mode }), reader: new PlanEnforcer({ plans: PLANS, redis: direct }) };
}

/** Loses the connection while replies are being dropped, and waits for the client to be back and to have added what it kept. */
async function reconnect(redis: Redis, enforcer: PlanEnforcer) {
  const back = new Promise<void>((r) => redis.once('ready', () => r()));
  proxy.cut();
  await back;
  await enforcer.flushPending();
  // A resent command would be on the wire by now; one more round trip on the same connection
  // makes sure Redis has run whatever was sent before it.
  await redis.ping();
}

/** How many times an EVAL carrying this script fragment went through the proxy. */
const evalsOf = (fragment: string) => proxy.sent.filter((chunk) => chunk.includes(fragment)).length;

describe('a write whose reply is lost applies exactly once', () => {
  it('fail-closed: a quota charge answered 503 (its reply lost) is not charged at all once Redis answers again', async () => {
    const { redis, enforcer, reader } = await enforcers();
    proxy.dropReplies();
    const refused = await enforcer.reserveQuota('acct', 'metered', 1e6).catch((error: ApiError) => error);
    expect((refused as ApiError).code).toBe('service_unavailable');
    // Redis did run the charge: the reply was all that was lost.
    expect((await reader.standing('acct', 'metered')).quota?.used).toBe(1);
    await reconnect(redis, enforcer);
    expect(evalsOf('if used + tonumber(ARGV[1]) > tonumber(ARGV[2])')).toBe(1); // the charge script: sent once, never resent
    expect((await reader.standing('acct', 'metered')).quota?.used).toBe(0);
  });

  it('insurance: a quota charge whose reply was lost is charged once, to the insurance share, and reaches Redis once', async () => {
    const { redis, enforcer, reader } = await enforcers('insurance');
    proxy.dropReplies();
    await enforcer.reserveQuota('acct', 'metered', 1e6); // the cutout is delivered: the charge stands
    await reconnect(redis, enforcer);
    expect((await reader.standing('acct', 'metered')).quota?.used).toBe(1);
  });

  it('a refund whose reply is lost gives back one charge, not two', async () => {
    const { redis, enforcer, reader } = await enforcers();
    await enforcer.reserveQuota('acct', 'metered', 1e6);
    const refund = await enforcer.reserveQuota('acct', 'metered', 1e6);
    expect((await reader.standing('acct', 'metered')).quota?.used).toBe(2);
    proxy.dropReplies();
    await refund();
    await reconnect(redis, enforcer);
    expect((await reader.standing('acct', 'metered')).quota?.used).toBe(1);
  });

  it('a usage record whose reply is lost is counted once', async () => {
    const { redis, enforcer, reader } = await enforcers();
    proxy.dropReplies();
    await enforcer.recordUsage('acct', 2e6);
    await reconnect(redis, enforcer);
    expect((await reader.standing('acct', 'metered')).usage).toMatchObject({ images: 1, megapixels: 2 });
  });

  it('a usage record lost on its way (sent, never run) is added once Redis answers again, with its megapixels', async () => {
    const { redis, enforcer, reader } = await enforcers();
    proxy.dropRequests();
    await enforcer.recordUsage('acct', 2.5e6);
    expect(enforcer.hasPendingUsage).toBe(true);
    expect((await reader.standing('acct', 'metered')).usage).toMatchObject({ images: 0, megapixels: 0 });
    await reconnect(redis, enforcer);
    expect((await reader.standing('acct', 'metered')).usage).toMatchObject({ images: 1, megapixels: 2.5 });
    expect(enforcer.hasPendingUsage).toBe(false);
  });
});

describe('close() adds what is pending before it resolves', () => {
  it('usage kept while Redis was away is in Redis when close() resolves, even if Redis came back a moment before', async () => {
    const { redis, enforcer, reader } = await enforcers();
    await server.stop();
    // 200 accounts' records, never sent: on reconnect they go to Redis one by one.
    for (let i = 0; i < 200; i++) await enforcer.recordUsage(`acct${i}`, 1e6);
    await server.restart();
    // The client may be back before restart() resolves (its reconnect can beat the server's
    // ready check): waiting for a 'ready' that had already fired hung the test for its 60 s (CI).
    await ready(redis);
    await enforcer.close();
    // The reader's own connection was cut by the restart too: read once it is back.
    await ready(direct);
    const images = await Promise.all(Array.from({ length: 200 }, async (_, i) => (await reader.standing(`acct${i}`, 'metered')).usage.images));
    expect(images.filter((n) => n === 1)).toHaveLength(200);
  });
});
