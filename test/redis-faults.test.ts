import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { connectRedis } from '../src/core/index.js';
import { settle } from './helpers/abort-storm.js';
import { startRedis, type RedisServer } from './helpers/redis-server.js';
import { photoForm, startStressApp, type StressApp } from './helpers/stress-app.js';

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
    app = await startStressApp({ inferenceAddress: inject('inferenceAddress'), framework, redis });
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

  it('paused (DEBUG SLEEP): requests get their answer or a prompt 503, never a 500, a 401 or a 429', async () => {
    expect(await cheap()).toMatchObject({ status: 415, code: 'not_multipart' });
    const pause = admin.call('DEBUG', 'SLEEP', '3');
    await new Promise((r) => setTimeout(r, 100));
    const during = await Promise.all(Array.from({ length: 5 }, cheap));
    await pause;
    for (const r of during) {
      expect([415, 503]).toContain(r.status);
      if (r.status === 503) expect(r.code).toBe('service_unavailable');
      // The command timeout (1 s) bounds the wait, with room for a busy machine.
      expect(r.ms).toBeLessThan(2_900);
    }
    expect(await cheap()).toMatchObject({ status: 415 });
  });

  it("paused while a cutout runs: its concurrency slot is released within seconds once Redis is back", async () => {
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
    console.log(`${framework}: cutout answered ${response.status} during the pause; in progress back to ${inProgress} ${Math.round(performance.now() - backAt)} ms after Redis returned`);
    expect(inProgress).toBe(0);
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
    for (const error of app.internalErrors) expect(String(error)).toMatch(/Command timed out|connection is not ready|Connection is closed|ECONNREFUSED|redis/i);
  }, 60_000);
});
