import { describe, expect, inject, it } from 'vitest';
import { createRemoveBgHandler, type KeyLookup, type KeyStore } from '../src/core/index.js';
import { drivenRequest, pause } from './helpers/core-request.js';
import { createTestKeys, TEST_PLANS } from './helpers/fixtures.js';

describe('maxInFlight', () => {
  it('holds when requests arrive together: the cap is reserved before any wait', async () => {
    const keys = await createTestKeys();
    // Every lookup answers at the same moment, so the requests reach the cap together.
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const store: KeyStore = {
      async findByHash(hash: string): Promise<KeyLookup | undefined> {
        await gate;
        return keys.store.findByHash(hash);
      },
    };
    const handler = createRemoveBgHandler({
      keyStore: store,
      plans: TEST_PLANS,
      inference: { address: inject('inferenceAddress') },
      limits: { maxInFlight: 1, uploadTimeoutMs: 60_000 },
      onInternalError: () => {},
    });
    const requests = [0, 1, 2].map(() => drivenRequest({ key: keys.good }));
    const answers = requests.map((r) => handler.handle(r.request));
    await pause(50);
    open();
    // Two are refused at once; the one let in waits for a body that never comes.
    const settled = await Promise.all(answers.map((a) => Promise.race([a, pause(2_000).then(() => undefined)])));
    const statuses = settled.map((r) => r?.status);
    expect(statuses.filter((s) => s === 503)).toHaveLength(2);
    expect(statuses.filter((s) => s === undefined)).toHaveLength(1);
    for (const r of requests) r.abort();
    await Promise.all(answers);
    await handler.close();
  });
});
