import { describe, expect, inject, it } from 'vitest';
import { createRemoveBgHandler, type AccessLogEntry, type KeyLookup, type KeyStore, type RemoveBgHandler, type RequestLimits } from '../src/core/index.js';
import { drivenRequest, pause, uploadRequest } from './helpers/core-request.js';
import { createTestKeys, TEST_PLANS } from './helpers/fixtures.js';
import { objectOnTexture } from './helpers/synthetic-image.js';
import { captureInternalError } from './helpers/log-capture.js';
import { settle } from './helpers/abort-storm.js';
import { metricValue } from './helpers/fuzz.js';
import { startInferenceProcess } from './helpers/inference-process.js';

const metricsRequest = () => ({ ...drivenRequest({ url: '/metrics' }).request, method: 'GET' });

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
    onInternalError: captureInternalError,
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
    // Event-based proof of admission: the handler reads the body only once the request is let in...
    while (first.body.listenerCount('data') === 0) await pause(5);
    // ...and holds the account's only slot: a second request of the account is refused for it.
    const second = drivenRequest({ key: keys.oneAtATime });
    second.body.end();
    const refused = await handler.handle(second.request);
    expect([refused.status, JSON.parse(refused.body.toString()).code]).toEqual([429, 'concurrency_limited']);
    // The body never comes; the client gives up while the handler waits for it.
    first.abort();
    expect(await within5s(answered), 'the handler still held the request 5 s after its client left').toBeDefined();
    expect(log.at(-1)?.code).toBe('client_closed');
    await expectSlotFree(handler, keys.oneAtATime);
    await handler.close();
  });

  it('a request queued for an inference slot whose client left never runs its inference', async () => {
    // Its own inference server, so the count of inferences it started is this test's alone.
    const server = await startInferenceProcess(['--metrics-port', '0']);
    const keys = await createTestKeys();
    const log: AccessLogEntry[] = [];
    const handler = createRemoveBgHandler({
      keyStore: keys.store,
      plans: TEST_PLANS,
      inference: { address: server.address },
      limits: { uploadTimeoutMs: 60_000, maxConcurrentInferences: 1 },
      onResponse: (entry) => log.push(entry),
      onInternalError: captureInternalError,
    });
    try {
      await handler.ready();
      const started = async () => metricValue(await (await fetch(server.metricsUrl!)).text(), 'bgcut_inference_started_total');
      const waiting = async () => metricValue(await (await handler.metrics(metricsRequest())).body.toString(), 'bgcut_inference_slots_waiting');
      const warmUps = await started();
      const image = (await objectOnTexture(320, 240)).bytes;
      const running = handler.handle(uploadRequest(keys.good, image).request);
      // Event-based: the first request's inference has started on the server...
      await settle(started, (count) => count > warmUps, 60_000);
      const queued = uploadRequest(keys.good, image);
      const queuedAnswer = handler.handle(queued.request);
      // ...and the second waits for the API's only inference slot, which the first holds.
      expect(await settle(waiting, (count) => count >= 1, 30_000)).toBe(1);
      queued.abort();
      const [first, second] = await Promise.all([running, queuedAnswer]);
      expect(first.status).toBe(200);
      expect(log.filter((entry) => entry.code === 'client_closed')).toHaveLength(1);
      expect(second.status).toBe(499);
      // The server started exactly one inference after its warm-up: the first request's.
      expect((await started()) - warmUps).toBe(1);
    } finally {
      await handler.close();
      await server.stop();
    }
  }, 120_000);
});
