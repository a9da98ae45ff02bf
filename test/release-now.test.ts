import express from 'express';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { routeMiddleware } from '../src/adapters/express.js';
import { createRemoveBgHandler, MemoryIdempotencyStore, type RemoveBgHandler } from '../src/core/index.js';
import type { CoreResponse } from '../src/core/http-types.js';
import { releaseNow, RELEASE_MIN_BYTES } from '../src/util/release-now.js';
import { uploadRequest } from './helpers/core-request.js';
import { createTestKeys, TEST_PLANS, type TestKeys } from './helpers/fixtures.js';
import { captureInternalError } from './helpers/log-capture.js';
import { objectOnTexture } from './helpers/synthetic-image.js';

/**
 * A cutout's response body goes back once the adapter wrote it out, not at V8's next full
 * collection of the host's thread (which runs only after 64 MB more external memory: under 16
 * concurrent 12 MP uploads the main thread held the encoded images of finished requests beside
 * the live ones; docs/benchmarks.md, "Seventh round"). A released buffer reads as empty (its
 * ArrayBuffer detached); anything not the request's alone is left to the collector.
 */
describe('releaseNow', () => {
  it('frees a buffer that has its memory to itself, and nothing else', () => {
    const own = Buffer.allocUnsafeSlow(1 << 20).fill(7);
    expect(releaseNow(own)).toBe(true);
    expect(own.length).toBe(0);
    expect(own.buffer.byteLength).toBe(0);

    const whole = Buffer.allocUnsafeSlow(1 << 20).fill(1);
    const view = whole.subarray(16);
    expect(releaseNow(view)).toBe(false);
    expect(whole.length).toBe(1 << 20);
    // Up to `slack` bytes that the view leaves out: released.
    expect(releaseNow(view, 16)).toBe(true);
    expect(whole.length).toBe(0);

    const shared = Buffer.from(new SharedArrayBuffer(1 << 20));
    expect(releaseNow(shared)).toBe(false);
    expect(shared.length).toBe(1 << 20);
    const small = Buffer.from('a pooled small buffer');
    expect(releaseNow(small)).toBe(false);
    expect(small.toString()).toBe('a pooled small buffer');
    expect(releaseNow(undefined)).toBe(false);
  });
});

describe('the Express adapter frees a body it alone holds once written', () => {
  async function serve(wrapEnd: boolean) {
    const body = Buffer.allocUnsafeSlow(256 * 1024).fill(42);
    let released = false;
    const response: CoreResponse = { status: 200, headers: { 'content-type': 'application/octet-stream' }, body, release: () => (released = releaseNow(body)) };
    const app = express();
    if (wrapEnd) {
      // A host middleware that wraps the response's writes (as compression does) may hold the body.
      app.use((_req, res, next) => {
        const end = res.end.bind(res);
        res.end = ((...args: Parameters<typeof end>) => end(...args)) as typeof res.end;
        next();
      });
    }
    let finished!: Promise<void>;
    app.post('/cut', (req, res, next) => {
      finished = new Promise((resolve) => res.once('finish', () => setImmediate(resolve)));
      routeMiddleware(async () => response)(req, res, next);
    });
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    try {
      const answer = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/cut`, { method: 'POST', body: 'x' });
      const received = Buffer.from(await answer.arrayBuffer());
      // The client got every byte, released or not.
      expect(received.length).toBe(256 * 1024);
      expect(received.every((b) => b === 42)).toBe(true);
      await finished;
      return { released, bodyLength: body.length };
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  }

  it('releases it after the response finished', async () => {
    expect(await serve(false)).toEqual({ released: true, bodyLength: 0 });
  });

  it("leaves it to the collector when a middleware wrapped the response's end", async () => {
    expect(await serve(true)).toEqual({ released: false, bodyLength: 256 * 1024 });
  });
});

describe('which cutout answers may be released', () => {
  let keys: TestKeys;
  let handler: RemoveBgHandler;
  let photo: Buffer;
  beforeAll(async () => {
    keys = await createTestKeys();
    // Large enough that its PNG is past RELEASE_MIN_BYTES.
    photo = (await objectOnTexture(1000, 750)).bytes;
    handler = createRemoveBgHandler({
      keyStore: keys.store,
      plans: TEST_PLANS,
      inference: { address: inject('inferenceAddress') },
      idempotency: { store: new MemoryIdempotencyStore() },
      pixelThreads: 1,
      onInternalError: captureInternalError,
    });
    await handler.ready();
  });
  afterAll(() => handler?.close());

  it('a cutout is released by release(); one an idempotency store keeps (to replay it) has no release', async () => {
    const plain = await handler.handle(uploadRequest(keys.good, photo).request);
    expect(plain.status).toBe(200);
    expect(plain.release).toBeTypeOf('function');
    expect(plain.body.length).toBeGreaterThanOrEqual(RELEASE_MIN_BYTES);
    plain.release!();
    expect(plain.body.length).toBe(0);

    const driven = uploadRequest(keys.good, photo);
    driven.request.headers['idempotency-key'] = `release-${Date.now()}`;
    const kept = await handler.handle(driven.request);
    expect(kept.status).toBe(200);
    expect(kept.release).toBeUndefined();
  }, 300_000);
});
