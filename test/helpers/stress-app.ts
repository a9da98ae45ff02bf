/**
 * One API instance over real HTTP for the storm, slow-client and fault runs: the example Express
 * or Fastify app around a handler with small, explicit limits, and a key per purpose.
 */
import type { AddressInfo } from 'node:net';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Redis } from 'ioredis';
import { createExpressApp } from '../../examples/express-app.js';
import { createFastifyApp } from '../../examples/fastify-app.js';
import { createRemoveBgHandler, FileKeyStore, type Plans, type RemoveBgHandler, type RemoveBgOptions } from '../../src/core/index.js';
import { captureInternalError, recordIssuedKeys } from './log-capture.js';
import { holdings, type Holdings } from './abort-storm.js';
import { objectOnTexture } from './synthetic-image.js';

export const STRESS_PLANS: Plans = {
  // maxConcurrent is set (far above what the runs open) so the account's in-progress count is kept.
  storm: { requestsPerMinute: 100_000_000, maxConcurrent: 10_000 },
  tiny: { requestsPerMinute: 1, burst: 0 },
  // bench/scale-redis.ts: a rate shared by every instance, and a quota counter to compare with the 200s.
  scale: { requestsPerMinute: 30, burst: 0, monthlyQuota: { unit: 'images', amount: 100_000 } },
  scaleFailover: { requestsPerMinute: 100_000, monthlyQuota: { unit: 'images', amount: 100_000 } },
};

export interface StressApp {
  baseUrl: string;
  handler: RemoveBgHandler;
  /** Key of the `storm` plan (and its account id). */
  key: string;
  accountId: string;
  /** Key of a plan with one request a minute, for 429s. */
  tinyKey: string;
  internalErrors: unknown[];
  holdings(): Promise<Holdings>;
  /** The account's requests in progress, as GET /v1/account reports them. */
  inProgress(key?: string): Promise<number>;
  close(): Promise<void>;
}

export async function startStressApp(options: {
  inferenceAddress: string;
  framework?: 'express' | 'fastify';
  redis?: Redis;
  limits?: RemoveBgOptions['limits'];
  inference?: RemoveBgOptions['inference'];
  concurrencyLeaseMs?: number;
}): Promise<StressApp> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-stress-keys-'));
  const store = new FileKeyStore({ file: path.join(dir, 'keys.json'), reloadIntervalMs: 0 });
  const accountId = `acct_storm_${Math.random().toString(36).slice(2, 8)}`;
  const key = (await store.createKey({ accountId, plan: 'storm' })).key;
  const tinyKey = (await store.createKey({ accountId: `${accountId}_tiny`, plan: 'tiny' })).key;
  recordIssuedKeys([key, tinyKey]);
  const internalErrors: unknown[] = [];
  const handler = createRemoveBgHandler({
    keyStore: store,
    plans: STRESS_PLANS,
    ...(options.redis ? { redis: options.redis } : {}),
    ...(options.concurrencyLeaseMs ? { concurrencyLeaseMs: options.concurrencyLeaseMs } : {}),
    inference: { address: options.inferenceAddress, timeoutMs: 30_000, retryAfterSeconds: 1, ...options.inference },
    limits: { maxUploadBytes: 2 * 1024 * 1024, maxInFlight: 2_000, maxConcurrentInferences: 1, uploadTimeoutMs: 10_000, ...options.limits },
    onInternalError: (error) => {
      internalErrors.push(error);
      captureInternalError(error);
    },
  });
  await handler.ready();
  let baseUrl: string;
  let close: () => Promise<void>;
  if ((options.framework ?? 'express') === 'express') {
    const server = createExpressApp(handler).listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    close = () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      });
  } else {
    const app = await createFastifyApp(handler);
    await app.listen({ port: 0, host: '127.0.0.1' });
    baseUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    close = () => app.close();
  }
  const metricsText = async () =>
    (await handler.metrics({ method: 'GET', url: '/metrics', headers: {}, body: undefined as never, signal: new AbortController().signal })).body.toString();
  return {
    baseUrl,
    handler,
    key,
    accountId,
    tinyKey,
    internalErrors,
    holdings: async () => holdings(await metricsText()),
    async inProgress(k = key) {
      const response = await fetch(`${baseUrl}/v1/account`, { headers: { 'x-api-key': k } });
      const body = (await response.json()) as { inProgress?: number };
      if (typeof body.inProgress !== 'number') throw new Error(`GET /v1/account answered ${response.status} ${JSON.stringify(body)}`);
      return body.inProgress;
    },
    async close() {
      await close();
      await handler.close();
    },
  };
}

/** A multipart body holding a small real photo-like JPEG. */
export async function photoForm(width = 320, height = 240): Promise<{ body: Buffer; contentType: string }> {
  const image = await objectOnTexture(width, height);
  const boundary = '----bgcutStressForm';
  const body = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="photo.jpg"\r\nContent-Type: image/jpeg\r\n\r\n`),
    image.bytes,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  return { body, contentType: `multipart/form-data; boundary=${boundary}` };
}
