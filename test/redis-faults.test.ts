import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { connectRedis } from '../src/core/index.js';
import { settle } from './helpers/abort-storm.js';
import { startRedis, type RedisServer } from './helpers/redis-server.js';
import { photoForm, startStressApp, type StressApp } from './helpers/stress-app.js';

const LEASE_MS = 60_000;

// The short version of `npm run stress`'s Redis faults, on both adapters, with Redis-backed limits.
describe.each(['express', 'fastify'] as const)('Redis paused and killed under a %s app with Redis-backed limits', (framework) => {
  let redisServer: RedisServer;
  let redis: Redis;
  let admin: Redis;
  let app: StressApp;

  beforeAll(async () => {
    redisServer = await startRedis({ debugCommand: true });
    redis = connectRedis(redisServer.url, { onStateChange: () => {} });
    admin = new Redis(redisServer.port, '127.0.0.1', { maxRetriesPerRequest: 0, retryStrategy: () => 100 });
    admin.on('error', () => {});
    // A lease far longer than any wait below: a slot freed in time was released, not left to lapse.
    app = await startStressApp({ inferenceAddress: inject('inferenceAddress'), framework, redis, concurrencyLeaseMs: LEASE_MS });
  });
  afterAll(async () => {
    await app?.close();
    admin?.disconnect();
    redis?.disconnect();
    await redisServer?.stop();
  });

  /** A request with no body: it goes through every Redis-backed step of admission, then 415. */
  const cheap = async () => {
    const started = performance.now();
    const response = await fetch(`${app.baseUrl}/v1/remove-bg`, { method: 'POST', headers: { 'x-api-key': app.key } });
    const body = (await response.json()) as { code?: string };
    return { status: response.status, code: body.code, ms: performance.now() - started };
  };

  it('paused (DEBUG SLEEP): requests made during the pause get a prompt 503, never a 500, a 401 or a 429', async () => {
    expect(await cheap()).toMatchObject({ status: 415, code: 'not_multipart' });
    const pause = admin.call('DEBUG', 'SLEEP', '3');
    // Proof that Redis is asleep before the requests go: a PING sent after the DEBUG SLEEP on a
    // second connection is still unanswered.
    const probe = new Redis(redisServer.port, '127.0.0.1', { maxRetriesPerRequest: 0, enableOfflineQueue: true });
    probe.on('error', () => {});
    let pong = false;
    const ping = probe.ping().then(() => (pong = true), () => {});
    await new Promise((r) => setTimeout(r, 200));
    expect(pong, 'Redis answered during its DEBUG SLEEP').toBe(false);
    const sentAt = performance.now();
    const during = await Promise.all(Array.from({ length: 5 }, cheap));
    await pause;
    const wokeAt = performance.now();
    await ping;
    probe.disconnect();
    // Each request was answered before Redis woke: it overlapped the pause from start to end.
    expect(sentAt + Math.max(...during.map((r) => r.ms))).toBeLessThan(wokeAt);
    for (const r of during) {
      expect(r).toMatchObject({ status: 503, code: 'service_unavailable' });
      // The command timeout (1 s) bounds the wait, with room for a busy machine.
      expect(r.ms).toBeLessThan(2_900);
    }
    expect(await cheap()).toMatchObject({ status: 415 });
  });

  it('paused while a cutout runs: its concurrency slot is released within ~1 s of Redis being back (not left to its lease)', async () => {
    const form = await photoForm(160, 120);
    const cutout = fetch(`${app.baseUrl}/v1/remove-bg`, { method: 'POST', headers: { 'x-api-key': app.key, 'content-type': form.contentType }, body: form.body });
    // Event-based: pause Redis once the cutout holds an inference slot, so its release meets the pause.
    const held = await settle(app.holdings, (h) => h.slots >= 1, 60_000);
    expect(held.slots).toBe(1);
    const pause = admin.call('DEBUG', 'SLEEP', '6');
    const response = await cutout;
    await response.arrayBuffer();
    await pause;
    const backAt = performance.now();
    const inProgress = await settle(() => app.inProgress().catch(() => -1), (n) => n === 0, 30_000);
    const freedMs = Math.round(performance.now() - backAt);
    console.log(`${framework}: cutout answered ${response.status} during the pause; in progress back to ${inProgress} ${freedMs} ms after Redis returned`);
    expect(inProgress).toBe(0);
    // The release is retried (backoff capped at 1 s) until Redis answers: about 1 s, with room
    // for a busy machine; the lease alone would hold the slot for up to LEASE_MS.
    expect(freedMs).toBeLessThan(3_000);
    expect(await app.holdings()).toEqual({ inFlight: 0, slots: 0, slotWaiters: 0, pixels: 0 });
  }, 120_000);

  it('killed: 503 service_unavailable at once; restarted: served again by itself', async () => {
    await redisServer.stop();
    const down = await cheap();
    expect(down).toMatchObject({ status: 503, code: 'service_unavailable' });
    expect(down.ms).toBeLessThan(2_900);
    await redisServer.restart();
    const back = await settle(cheap, (r) => r.status === 415, 20_000);
    expect(back).toMatchObject({ status: 415, code: 'not_multipart' });
    expect(await app.holdings()).toEqual({ inFlight: 0, slots: 0, slotWaiters: 0, pixels: 0 });
    // What the host's onInternalError heard: Redis being away, and nothing else.
    for (const error of app.internalErrors) expect(String(error)).toMatch(/Command timed out|connection is not ready|Connection is closed|Stream isn't writeable|ECONNREFUSED|redis/i);
  }, 60_000);
});
