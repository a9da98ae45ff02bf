import { describe, expect, inject, it } from 'vitest';
import { createRemoveBgHandler, type AccessLogEntry, type KeyLookup, type KeyStore, type RemoveBgHandler, type RequestLimits } from '../src/core/index.js';
import { drivenRequest, pause, uploadRequest } from './helpers/core-request.js';
import { createTestKeys, TEST_PLANS } from './helpers/fixtures.js';
import { objectOnTexture } from './helpers/synthetic-image.js';

/** A key store whose answers wait until the test lets them through. */
function heldKeyStore(inner: KeyStore) {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  let waiting = 0;
  const store: KeyStore = {
    async findByHash(hash: string): Promise<KeyLookup | undefined> {
      waiting++;
      await gate;
      return inner.findByHash(hash);
    },
  };
  return { store, open: () => open(), waiting: () => waiting };
}

/** A handler whose access log the test reads; the upload timer is long, so only cancellation can end a request in time. */
function loggedHandler(keyStore: KeyStore, limits: RequestLimits = {}) {
  const log: AccessLogEntry[] = [];
  const handler = createRemoveBgHandler({
    keyStore,
    plans: TEST_PLANS,
    inference: { address: inject('inferenceAddress') },
    limits: { uploadTimeoutMs: 60_000, ...limits },
    onResponse: (entry) => log.push(entry),
    onInternalError: () => {},
  });
  return { handler, log };
}

/** Resolves with the answer, or undefined if the handler still holds the request after 5 s. */
const within5s = <T>(answer: Promise<T>) => Promise.race([answer, pause(5_000).then(() => undefined)]);

/** The account allows one request at a time: a second one is served only if the first's slot came back. */
async function expectSlotFree(handler: RemoveBgHandler, key: string) {
  const second = drivenRequest({ key, contentType: 'text/plain' });
  second.body.end('not a form');
  expect((await handler.handle(second.request)).status).toBe(415);
}

describe('cancellation: a request whose client left gives back everything it held', () => {
  it('a client that leaves while its key is being looked up is answered at once, as client_closed, and holds no slot', async () => {
    const keys = await createTestKeys();
    const held = heldKeyStore(keys.store);
    const { handler, log } = loggedHandler(held.store);
    const first = drivenRequest({ key: keys.oneAtATime });
    const answered = handler.handle(first.request);
    while (held.waiting() === 0) await pause(5);
    first.abort();
    held.open();
    expect(await within5s(answered), 'the handler still held the request 5 s after its client left').toBeDefined();
    expect(log.at(-1)?.code).toBe('client_closed');
    await expectSlotFree(handler, keys.oneAtATime);
    await handler.close();
  });

  it('a client that leaves after admission, before sending its upload, frees its account slot at once', async () => {
    const keys = await createTestKeys();
    const { handler, log } = loggedHandler(keys.store);
    await handler.ready();
    const first = drivenRequest({ key: keys.oneAtATime });
    const answered = handler.handle(first.request);
    // The body never comes; the client gives up while the handler waits for it.
    await pause(300);
    first.abort();
    expect(await within5s(answered), 'the handler still held the request 5 s after its client left').toBeDefined();
    expect(log.at(-1)?.code).toBe('client_closed');
    await expectSlotFree(handler, keys.oneAtATime);
    await handler.close();
  });

  it('a request queued for an inference slot whose client left never runs its inference', async () => {
    const keys = await createTestKeys();
    const { handler, log } = loggedHandler(keys.store, { maxConcurrentInferences: 1 });
    await handler.ready();
    const image = (await objectOnTexture(320, 240)).bytes;
    const order: string[] = [];
    const running = handler.handle(uploadRequest(keys.good, image).request).then((r) => (order.push('running'), r));
    // The second waits for the only inference slot, which the first holds for a whole inference.
    await pause(300);
    const queued = uploadRequest(keys.good, image);
    const queuedAnswer = handler.handle(queued.request).then((r) => (order.push('queued'), r));
    await pause(300);
    queued.abort();
    await Promise.all([running, queuedAnswer]);
    // Left the queue at once: answered before the running inference finished, never started one.
    expect(order).toEqual(['queued', 'running']);
    expect(log.find((entry) => entry.code === 'client_closed')).toBeDefined();
    await handler.close();
  });
});
