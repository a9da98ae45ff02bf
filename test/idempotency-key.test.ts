import http from 'node:http';
import type { Redis } from 'ioredis';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { BgcutClient, RateLimitError } from '../src/client/index.js';
import {
  createRemoveBgHandler,
  MemoryIdempotencyStore,
  RedisKeyStore,
  type CoreResponse,
  type IdempotencyStore,
  type KeyStore,
  type RemoveBgOptions,
} from '../src/core/index.js';
import { createExpressApp } from '../examples/express-app.js';
import { baseUrlOf } from './conformance/suite.js';
import { drivenRequest, pause, uploadRequest } from './helpers/core-request.js';
import { createTestKeys, TEST_PLANS, type TestKeys } from './helpers/fixtures.js';
import { captureInternalError, recordIssuedKeys } from './helpers/log-capture.js';
import { redisTopologies, useRedisTopology } from './helpers/redis-topologies.js';
import { RedisIdempotencyStore } from '../src/core/idempotency/redis-store.js';
import { objectOnTexture } from './helpers/synthetic-image.js';

let keys: TestKeys;
let photo: Buffer;
let other: Buffer;
beforeAll(async () => {
  keys = await createTestKeys();
  photo = (await objectOnTexture(160, 120)).bytes;
  other = (await objectOnTexture(120, 160)).bytes;
});

const handlerWith = (options: Partial<RemoveBgOptions> = {}, keyStore: KeyStore = keys.store) =>
  createRemoveBgHandler({ keyStore, plans: TEST_PLANS, inference: { address: inject('inferenceAddress') }, onInternalError: captureInternalError, ...options });

/** One upload with an Idempotency-Key, straight into the handler. */
const send = (handle: (r: ReturnType<typeof uploadRequest>['request']) => Promise<CoreResponse>, key: string, image: Buffer, idempotencyKey?: string) => {
  const driven = uploadRequest(key, image);
  if (idempotencyKey !== undefined) driven.request.headers['idempotency-key'] = idempotencyKey;
  return handle(driven.request);
};
const codeOf = (response: CoreResponse) => (JSON.parse(response.body.toString()) as { code: string }).code;
/** The account's usage this month as GET /v1/account reads it back. */
async function usageOf(handler: { account: (r: ReturnType<typeof drivenRequest>['request']) => Promise<CoreResponse> }, key: string) {
  const driven = drivenRequest({ key, url: '/v1/account' });
  driven.request.method = 'GET';
  delete driven.request.headers['content-type'];
  driven.body.end();
  const response = await handler.account(driven.request);
  expect(response.status).toBe(200);
  return (JSON.parse(response.body.toString()) as { usage: { images: number }; quota: { used: number } | null });
}

/** Promise.withResolvers, which Node 20 lacks. */
function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** A memory store whose completions wait for the test's word, so a request can be caught in progress. */
class GatedStore extends MemoryIdempotencyStore {
  claimed = deferred();
  gate = deferred();
  override async claim(...args: Parameters<IdempotencyStore['claim']>) {
    const found = await super.claim(...args);
    if (found.state === 'claimed') this.claimed.resolve();
    return found;
  }
  override async complete(...args: Parameters<IdempotencyStore['complete']>) {
    await this.gate.promise;
    return super.complete(...args);
  }
}

describe('Idempotency-Key: a request retried with its key is charged once', () => {
  it('the retry gets the first answer (same bytes, Idempotent-Replayed) and the quota of one image is charged once', async () => {
    const handler = handlerWith();
    const first = await send(handler.handle, keys.oneImage, photo, 'retry-1');
    expect(first.status).toBe(200);
    const again = await send(handler.handle, keys.oneImage, photo, 'retry-1');
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.headers['x-ratelimit-limit']).toBe('1000'); // the account's standing now
    expect(Buffer.compare(again.body, first.body)).toBe(0);
    // The one image of the month was charged once: a new request is over the quota.
    const fresh = await send(handler.handle, keys.oneImage, photo, 'retry-2');
    expect([fresh.status, codeOf(fresh)]).toEqual([429, 'quota_exceeded']);
    const standing = await usageOf(handler, keys.oneImage);
    expect([standing.usage.images, standing.quota?.used]).toEqual([1, 1]);
    await handler.close();
  });

  it('the same key while its first request is in progress: 409 idempotency_key_in_use, then the first answer', async () => {
    const store = new GatedStore();
    const handler = handlerWith({ idempotency: { store } });
    const first = send(handler.handle, keys.oneImage, photo, 'slow');
    await store.claimed.promise;
    const during = await send(handler.handle, keys.oneImage, photo, 'slow');
    expect([during.status, codeOf(during)]).toEqual([409, 'idempotency_key_in_use']);
    expect(Number(during.headers['retry-after'])).toBeGreaterThan(0);
    store.gate.resolve();
    expect((await first).status).toBe(200);
    const after = await send(handler.handle, keys.oneImage, photo, 'slow');
    expect([after.status, after.headers['idempotent-replayed']]).toEqual([200, 'true']);
    await handler.close();
  });

  it('the same key with another image: 422 idempotency_key_reused, nothing charged', async () => {
    const handler = handlerWith();
    expect((await send(handler.handle, keys.good, photo, 'reused')).status).toBe(200);
    const different = await send(handler.handle, keys.good, other, 'reused');
    expect([different.status, codeOf(different)]).toEqual([422, 'idempotency_key_reused']);
    await handler.close();
  });

  it('keys are per account: another account using the same key runs its own request', async () => {
    const handler = handlerWith();
    expect((await send(handler.handle, keys.good, photo, 'shared-name')).status).toBe(200);
    const theirs = await send(handler.handle, keys.oneImage, other, 'shared-name');
    expect([theirs.status, theirs.headers['idempotent-replayed']]).toEqual([200, undefined]);
    await handler.close();
  });

  it.each([
    ['empty', ''],
    ['256 characters', 'k'.repeat(256)],
    ['a space', 'two words'],
    ['non-ASCII', 'clé'],
  ])('a malformed key (%s) is refused with 400 invalid_idempotency_key, before the upload is read', async (_, value) => {
    const handler = handlerWith();
    // An upload that never finishes: the answer can only come if nothing waits for the body.
    const driven = drivenRequest({ key: keys.good, headers: { 'idempotency-key': value, 'content-length': '1000000' } });
    driven.body.write(Buffer.from('------never-sent\r\nContent-Disposition: form-data; name="file"; filename="a.jpg"\r\n\r\n'));
    const response = await Promise.race([handler.handle(driven.request), pause(10_000).then(() => 'no answer while the upload hangs' as const)]);
    expect(response).not.toBe('no answer while the upload hangs');
    const answered = response as CoreResponse;
    expect([answered.status, codeOf(answered)]).toEqual([400, 'invalid_idempotency_key']);
    driven.abort();
    await handler.close();
  });

  it('a request that failed after claiming its key gives the key back: the retry runs (and is charged once)', async () => {
    const store = new MemoryIdempotencyStore();
    const handler = handlerWith({ idempotency: { store } });
    // The client leaves while the request holds the key.
    const driven = uploadRequest(keys.oneImage, photo);
    driven.request.headers['idempotency-key'] = 'left';
    const claimed = deferred();
    const claim = store.claim.bind(store);
    store.claim = async (...args) => {
      const found = await claim(...args);
      claimed.resolve();
      return found;
    };
    const answer = handler.handle(driven.request);
    await claimed.promise;
    driven.abort();
    expect((await answer).status).toBe(499);
    const retry = await send(handler.handle, keys.oneImage, photo, 'left');
    expect([retry.status, retry.headers['idempotent-replayed']]).toEqual([200, undefined]);
    // Charged once: the account's usage and quota, read back, count one image.
    const standing = await usageOf(handler, keys.oneImage);
    expect([standing.usage.images, standing.quota?.used]).toEqual([1, 1]);
    await handler.close();
  });

  it('a result larger than maxResultBytes is not kept and its key is released: the retry runs again (and is charged again)', async () => {
    const handler = handlerWith({ idempotency: { maxResultBytes: 100 } });
    expect((await send(handler.handle, keys.oneImage, photo, 'big')).status).toBe(200);
    const again = await send(handler.handle, keys.oneImage, photo, 'big');
    // A fresh run: the one-image quota is spent, so it is refused as a new request would be.
    expect([again.status, codeOf(again)]).toEqual([429, 'quota_exceeded']);
    await handler.close();
  });

  it('the memory store keeps at most memoryMaxBytes of results, dropping the least recently used', async () => {
    const store = new MemoryIdempotencyStore({ maxBytes: 3000 });
    const times = { keyTtlMs: 60_000, resultTtlMs: 60_000, inProgressTtlMs: 60_000 };
    const keep = async (key: string) => {
      await store.claim(key, 'fp', key, times);
      await store.complete(key, key, { status: 200, headers: {}, body: Buffer.alloc(100) }, times);
    };
    await keep('a');
    await keep('b');
    // 'a' is replayed (used) after 'b' was stored: least recently used is now 'b', first in is still 'a'.
    expect(await store.claim('a', 'fp', 'x', times)).toMatchObject({ state: 'done', result: { status: 200 } });
    await keep('c');
    // 3 x (100 + 1 KiB counted for headers) do not fit in 3000 bytes: 'b' went (FIFO would drop 'a'); its key stays.
    expect(await store.claim('b', 'fp', 'x', times)).toMatchObject({ state: 'done', result: undefined });
    expect(await store.claim('a', 'fp', 'x', times)).toMatchObject({ state: 'done', result: { status: 200 } });
    expect(await store.claim('c', 'fp', 'x', times)).toMatchObject({ state: 'done', result: { status: 200 } });
  });
});

describe.each(redisTopologies)('Idempotency-Key across instances sharing $name', (topology) => {
  const shared = useRedisTopology(topology);

  it('keeps at most redisMaxBytes of answers per instance: one past it is not stored and its key is released', async () => {
    const store = new RedisIdempotencyStore(shared.redis, { keyPrefix: `ib${Math.random().toString(36).slice(2)}`, maxBytes: 250 });
    const times = { keyTtlMs: 60_000, resultTtlMs: 30_000, inProgressTtlMs: 60_000 };
    for (const key of ['a', 'b', 'c']) {
      expect(await store.claim(key, 'fp', key, times)).toMatchObject({ state: 'claimed' });
      await store.complete(key, key, { status: 200, headers: {}, body: Buffer.alloc(100, key) }, times);
    }
    expect(await store.claim('a', 'fp', 'x', times)).toMatchObject({ state: 'done', result: { status: 200, body: Buffer.alloc(100, 'a') } });
    expect(await store.claim('b', 'fp', 'x', times)).toMatchObject({ state: 'done', result: { status: 200 } });
    // 300 bytes do not fit in 250: the third answer was not stored, and its key is free again.
    expect(await store.claim('c', 'fp', 'y', times)).toEqual({ state: 'claimed', token: 'y' });
  });

  it('a retry that lands on the other instance is answered from the first instance\'s result, and charged once', async () => {
    const store = new RedisKeyStore({ redis: shared.redis });
    const { key } = await store.createKey({ accountId: 'acct_idem', plan: 'one_image' });
    recordIssuedKeys([key]);
    const a = handlerWith({ redis: shared.redis }, store);
    const b = handlerWith({ redis: shared.redis }, store);
    const first = await send(a.handle, key, photo, 'across');
    expect(first.status).toBe(200);
    const retry = await send(b.handle, key, photo, 'across');
    expect([retry.status, retry.headers['idempotent-replayed']]).toEqual([200, 'true']);
    expect(Buffer.compare(retry.body, first.body)).toBe(0);
    const fresh = await send(b.handle, key, photo, 'new');
    expect(codeOf(fresh)).toBe('quota_exceeded');
    await Promise.all([a.close(), b.close()]);
  });
});

describe('the client keeps one Idempotency-Key across its retries', () => {
  it('an answer lost on the way back is retried and answered from the first result, charged once', async () => {
    const handler = handlerWith();
    const app = createExpressApp(handler, '/api');
    let attempts = 0;
    const seenKeys: (string | undefined)[] = [];
    // The first attempt is processed in full, then its connection is dropped before the answer.
    const server = http.createServer((req, res) => {
      attempts++;
      seenKeys.push(req.headers['idempotency-key'] as string | undefined);
      if (attempts === 1) {
        const end = res.end.bind(res);
        res.end = ((...args: Parameters<typeof end>) => {
          req.socket.destroy();
          return res;
        }) as typeof res.end;
        void end;
      }
      app(req, res);
    });
    server.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    const client = new BgcutClient({ apiKey: keys.oneImage, baseUrl: `${baseUrlOf(server)}/api`, retry: { baseDelayMs: 10 } });
    const cutout = await client.removeBackground(new Blob([photo]), { filename: 'a.jpg' }).catch((error: unknown) => error);
    expect(cutout).not.toBeInstanceOf(RateLimitError); // a second charge would be over the one-image quota
    expect(cutout).toMatchObject({ attempts: 2, width: 160 });
    expect(seenKeys).toHaveLength(2);
    expect(seenKeys[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(seenKeys[1]).toBe(seenKeys[0]);
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    await handler.close();
  });
});
