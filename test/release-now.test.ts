import express from 'express';
import Fastify from 'fastify';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { routeMiddleware } from '../src/adapters/express.js';
import { removeBgPlugin } from '../src/adapters/fastify.js';
import { createFetchHandler } from '../src/adapters/fetch.js';
import { responseCopiesBody } from '../src/adapters/response-copies-body.js';
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
 * the live ones; docs/benchmarks-history.md, "Seventh round"). A released buffer reads as empty (its
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

/** A handler of one route, `/cut`, answering `response` (what an adapter is given to write). */
function oneRouteHandler(response: () => CoreResponse): RemoveBgHandler {
  const handle = async () => response();
  return { handle, routes: [{ path: '/cut', handle }], apiDocs: undefined } as unknown as RemoveBgHandler;
}

/** A 256 KiB body the adapter alone holds, and whether its release() freed it. */
function releasable() {
  const body = Buffer.allocUnsafeSlow(256 * 1024).fill(42);
  const state = { released: false };
  const response: CoreResponse = { status: 200, headers: { 'content-type': 'application/octet-stream' }, body, release: () => (state.released = releaseNow(body)) };
  return { body, state, response };
}

const allBytes42 = (bytes: Buffer) => bytes.length === 256 * 1024 && bytes.every((b) => b === 42);

describe('the Fastify adapter frees a body it alone holds once written', () => {
  async function serve(hook: 'none' | 'keeps payload') {
    const { body, state, response } = releasable();
    const app = Fastify();
    let kept: unknown;
    // A host hook that keeps the payload past the response (a cache): the body must stay whole.
    if (hook === 'keeps payload') app.addHook('onSend', async (_request, _reply, payload) => ((kept = payload), payload));
    let finished!: Promise<void>;
    app.addHook('onRequest', async (_request, reply) => {
      finished = new Promise((resolve) => reply.raw.once('finish', () => setImmediate(resolve)));
    });
    await app.register(removeBgPlugin, { handler: oneRouteHandler(() => response) });
    const address = await app.listen({ port: 0, host: '127.0.0.1' });
    try {
      const answer = await fetch(`${address}/cut`, { method: 'POST', body: 'x' });
      // The client got every byte, released or not.
      expect(allBytes42(Buffer.from(await answer.arrayBuffer()))).toBe(true);
      await finished;
      return { released: state.released, bodyLength: body.length, keptWhole: kept === undefined || allBytes42(kept as Buffer) };
    } finally {
      await app.close();
    }
  }

  it('releases it after the response finished', async () => {
    expect(await serve('none')).toEqual({ released: true, bodyLength: 0, keptWhole: true });
  });

  it('leaves it to the collector when an onSend hook runs (it may keep the payload)', async () => {
    expect(await serve('keeps payload')).toEqual({ released: false, bodyLength: 256 * 1024, keptWhole: true });
  });
});

describe('the fetch adapter frees a body it alone holds once its Response has the bytes', () => {
  it("Node's Response copies a byte body as it is made (the Fetch standard's rule the release relies on)", async () => {
    expect(await responseCopiesBody()).toBe(true);
  });

  it('releases it, and the Response still reads every byte', async () => {
    const { body, state, response } = releasable();
    const answer = await createFetchHandler(oneRouteHandler(() => response))(new Request('http://127.0.0.1/cut', { method: 'POST', body: 'x' }));
    expect(state.released).toBe(true);
    expect(body.length).toBe(0);
    expect(allBytes42(Buffer.from(await answer.arrayBuffer()))).toBe(true);
  });

  it('leaves a body without release() (an idempotency store keeps it) whole', async () => {
    const { body, response } = releasable();
    const answer = await createFetchHandler(oneRouteHandler(() => ({ ...response, release: undefined })))(new Request('http://127.0.0.1/cut', { method: 'POST', body: 'x' }));
    expect(allBytes42(Buffer.from(await answer.arrayBuffer()))).toBe(true);
    expect(body.length).toBe(256 * 1024);
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
