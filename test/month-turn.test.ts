import { afterEach, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { createRemoveBgHandler, type LocalUsageStore } from '../src/core/index.js';
import { MemoryQuotaStore } from '../src/core/limits/quota-store.js';
import { MemoryUsageMeter } from '../src/core/limits/usage-meter.js';
import { uploadRequest } from './helpers/core-request.js';
import { createTestKeys, TEST_PLANS, type TestKeys } from './helpers/fixtures.js';
import { captureInternalError } from './helpers/log-capture.js';
import { objectOnTexture } from './helpers/synthetic-image.js';

/**
 * The handler's quota and usage in memory, noting the month of each quota charge and each usage
 * record; the clock turns to the next month right after a charge, while the cutout runs.
 */
class MonthTurningStore implements LocalUsageStore {
  private readonly quota = new MemoryQuotaStore();
  private readonly usage = new MemoryUsageMeter();
  readonly charged: string[] = [];
  readonly recorded: string[] = [];

  constructor(private readonly turnTo: Date) {}

  async charge(...args: Parameters<LocalUsageStore['charge']>) {
    const charged = await this.quota.charge(...args);
    this.charged.push(args[0].slice(-7));
    vi.setSystemTime(this.turnTo);
    return charged;
  }
  refund(...args: Parameters<LocalUsageStore['refund']>) {
    return this.quota.refund(...args);
  }
  adjust(...args: Parameters<LocalUsageStore['adjust']>) {
    return this.quota.adjust(...args);
  }
  used(key: string) {
    return this.quota.used(key);
  }
  add(...args: Parameters<LocalUsageStore['add']>) {
    this.recorded.push(args[1]);
    return this.usage.add(...args);
  }
  get(accountId: string, month: string) {
    return this.usage.get(accountId, month);
  }
}

describe('a cutout at the turn of the month', () => {
  let keys: TestKeys;
  let photo: Buffer;
  beforeAll(async () => {
    keys = await createTestKeys();
    photo = (await objectOnTexture(160, 120)).bytes;
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('admitted at 23:59:59.9 on 31 October and delivered after midnight: its quota charge and its usage record are both October\'s', async () => {
    // Only Date is faked: timers, the model and gRPC run for real.
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(new Date('2026-10-31T23:59:59.900Z'));
    const store = new MonthTurningStore(new Date('2026-11-01T00:00:00.500Z'));
    const handler = createRemoveBgHandler({ keyStore: keys.store, plans: TEST_PLANS, usageStore: store, inference: { address: inject('inferenceAddress') }, onInternalError: captureInternalError });
    try {
      const response = await handler.handle(uploadRequest(keys.oneImage, photo).request);
      expect(response.status).toBe(200);
      expect(new Date().toISOString()).toBe('2026-11-01T00:00:00.500Z'); // the month did turn during the cutout
      // One month for both: the quota used and the usage of a month always count the same cutouts.
      expect({ charged: store.charged, recorded: store.recorded }).toEqual({ charged: ['2026-10'], recorded: ['2026-10'] });
    } finally {
      await handler.close();
    }
  });
});
