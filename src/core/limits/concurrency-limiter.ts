import type { ConcurrencyStore, SlotLease } from './concurrency.js';
import type { Insurance } from './insurance.js';

/**
 * Each account's requests in progress, against its plan's `maxConcurrent`: slots from the shared
 * store, or from this instance's memory store (at its share of the limit) while the shared one
 * fails in insurance mode.
 */
export class ConcurrencyLimiter {
  constructor(
    private readonly shared: ConcurrencyStore,
    private readonly fallback: ConcurrencyStore,
    private readonly insurance: Insurance,
  ) {}

  /** A lease on one of the account's `max` slots, or undefined when all are taken. */
  async acquire(accountId: string, max: number, signal?: AbortSignal): Promise<SlotLease | undefined> {
    const { value } = await this.insurance.run(
      'concurrency store',
      signal,
      () => this.shared.acquire(accountId, max, { signal }),
      () => this.fallback.acquire(accountId, this.insurance.share(max), { signal }),
    );
    return value;
  }

  inUse(accountId: string): Promise<number> {
    return this.shared.inUse(accountId);
  }
}
