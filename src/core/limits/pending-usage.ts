import type { QuotaStore } from './quota-store.js';
import type { UsageMeter } from './usage-meter.js';

/**
 * What the shared (Redis) stores have not heard yet: quota charged in memory while Redis was away
 * (insurance mode), refunds and usage records that failed against Redis. Kept per quota key and
 * per account and month, so it stays as small as the set of accounts served meanwhile, and added
 * to Redis when it is reachable again. Held in this process's memory: an instance that stops
 * before Redis returns loses it (see the README's failure table).
 */
export class PendingUsage {
  private readonly quota = new Map<string, number>();
  private readonly usage = new Map<string, { accountId: string; month: string; images: number; megapixels: number }>();
  private flushing: Promise<void> | undefined;

  get empty(): boolean {
    return this.quota.size === 0 && this.usage.size === 0;
  }

  /** A charge (positive) or refund (negative) of `key`'s monthly quota. */
  addQuota(key: string, delta: number): void {
    const total = (this.quota.get(key) ?? 0) + delta;
    if (total === 0) this.quota.delete(key);
    else this.quota.set(key, total);
  }

  addUsage(accountId: string, month: string, megapixels: number): void {
    const id = `${accountId}\n${month}`;
    const entry = this.usage.get(id) ?? { accountId, month, images: 0, megapixels: 0 };
    entry.images += 1;
    entry.megapixels += megapixels;
    this.usage.set(id, entry);
  }

  /**
   * Adds everything pending to the shared stores, entry by entry; what fails stays pending for
   * the next flush. One flush at a time.
   */
  flush(quotas: QuotaStore, meter: UsageMeter, quotaTtlSeconds: number): Promise<void> {
    this.flushing ??= (async () => {
      try {
        for (const [key, delta] of [...this.quota]) {
          await quotas.adjust(key, delta, quotaTtlSeconds);
          this.addQuota(key, -delta);
        }
        for (const [id, entry] of [...this.usage]) {
          const { images, megapixels } = entry; // more may arrive while this is written
          await meter.add(entry.accountId, entry.month, megapixels, images);
          entry.images -= images;
          entry.megapixels -= megapixels;
          if (entry.images <= 0) this.usage.delete(id);
        }
      } finally {
        this.flushing = undefined;
      }
    })();
    return this.flushing;
  }
}
