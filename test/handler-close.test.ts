import { describe, expect, inject, it } from 'vitest';
import { ActivityRecorder, createRemoveBgHandler, type ActivityBatch, type ActivityStore } from '../src/core/index.js';
import { drivenRequest } from './helpers/core-request.js';
import { createTestKeys, TEST_PLANS } from './helpers/fixtures.js';
import { captureInternalError } from './helpers/log-capture.js';

/** An activity store that keeps what it is given, in memory, as a dashboard store would keep it on disk. */
class KeptActivity implements ActivityStore {
  readonly batches: ActivityBatch[] = [];
  async addActivity(batch: ActivityBatch): Promise<void> {
    this.batches.push(batch);
  }
  async dailyCounts(accountId: string, days: string[]): Promise<number[]> {
    return days.map((day) => this.batches.flatMap((b) => b.daily).filter((d) => d.accountId === accountId && d.day === day).reduce((n, d) => n + d.count, 0));
  }
  async lastUsed(): Promise<Record<string, string>> {
    return {};
  }
}

describe('handler.close() loses nothing that was counted', () => {
  it('activity counted since the last write is written before close() resolves', async () => {
    const keys = await createTestKeys();
    const store = new KeptActivity();
    // The timer would write in an hour: only close() can write it in time.
    const activity = new ActivityRecorder({ store, flushIntervalMs: 3_600_000 });
    const handler = createRemoveBgHandler({ keyStore: keys.store, plans: TEST_PLANS, inference: { address: inject('inferenceAddress') }, activity, onInternalError: captureInternalError });
    for (let i = 0; i < 3; i++) {
      const request = drivenRequest({ key: keys.good, contentType: 'text/plain' });
      request.body.end('not a form');
      expect((await handler.handle(request.request)).status).toBe(415);
    }
    expect(store.batches).toHaveLength(0);
    await handler.close();
    expect(store.batches.flatMap((b) => b.daily).reduce((n, d) => n + d.count, 0)).toBe(3);
  });
});
