import { randomUUID } from 'node:crypto';
import type { QuotaStore } from './quota-store.js';
import type { UsageMeter } from './usage-meter.js';

/**
 * A write to Redis whose outcome is unknown (sent, but its reply was lost to a timeout or a
 * dropped connection): retried as it is, under its own op, so Redis applies it exactly once.
 */
export type InDoubtWrite =
  /** Undo the charge made as this op, or keep it from ever applying. */
  | { kind: 'refund'; key: string; cost: number }
  | { kind: 'usage'; accountId: string; month: string; megapixels: number; images: number };

type Write = InDoubtWrite | { kind: 'adjust'; key: string; delta: number };

/** Most writes kept in doubt; past it the newest are dropped (and counted), so memory stays bounded. */
export const MAX_IN_DOUBT = 100_000;

/**
 * What the shared (Redis) stores have not heard yet, and what they may not have heard:
 * - quota charged in memory while Redis was away (insurance mode) and records that never left
 *   this process are summed per quota key and per account and month (as small as the set of
 *   accounts served meanwhile);
 * - writes that were sent but not answered are kept one by one with their op, to retry as they are
 *   (a retry under a new op could count them twice; ioredis's own resending is off).
 * Added to Redis when it is reachable again. Held in this process's memory: an instance that stops
 * before Redis returns loses it (see docs/limits.md).
 */
export class PendingUsage {
  private readonly quota = new Map<string, number>();
  private readonly usage = new Map<string, { accountId: string; month: string; images: number; megapixels: number }>();
  private readonly writes = new Map<string, Write>();
  private flushing: Promise<void> | undefined;
  /** Writes dropped because MAX_IN_DOUBT were already kept. */
  dropped = 0;

  constructor(private readonly maxInDoubt = MAX_IN_DOUBT) {}

  get empty(): boolean {
    return this.quota.size === 0 && this.usage.size === 0 && this.writes.size === 0;
  }

  /** A charge (positive) or refund (negative) of `key`'s monthly quota that Redis never saw. */
  addQuota(key: string, delta: number): void {
    const total = (this.quota.get(key) ?? 0) + delta;
    if (total === 0) this.quota.delete(key);
    else this.quota.set(key, total);
  }

  /** A usage record that Redis never saw. */
  addUsage(accountId: string, month: string, megapixels: number): void {
    const id = `${accountId}\n${month}`;
    const entry = this.usage.get(id) ?? { accountId, month, images: 0, megapixels: 0 };
    entry.images += 1;
    entry.megapixels += megapixels;
    this.usage.set(id, entry);
  }

  /** A write sent as `op` whose outcome is unknown: retried under the same op. */
  inDoubt(op: string, write: InDoubtWrite): void {
    if (this.writes.size >= this.maxInDoubt && !this.writes.has(op)) {
      this.dropped++;
      return;
    }
    this.writes.set(op, write);
  }

  /**
   * Sends everything pending to the shared stores, write by write; what fails stays pending, under
   * the same op, for the next flush. Sums are turned into writes with an op of their own first.
   * One flush at a time.
   */
  flush(quotas: QuotaStore, meter: UsageMeter, quotaTtlSeconds: number): Promise<void> {
    this.flushing ??= (async () => {
      try {
        for (const [key, delta] of this.quota) this.writes.set(randomUUID(), { kind: 'adjust', key, delta });
        this.quota.clear();
        for (const entry of this.usage.values()) this.writes.set(randomUUID(), { kind: 'usage', ...entry });
        this.usage.clear();
        for (const [op, write] of [...this.writes]) {
          if (write.kind === 'adjust') await quotas.adjust(write.key, write.delta, quotaTtlSeconds, op);
          else if (write.kind === 'refund') await quotas.refund(write.key, write.cost, op);
          else await meter.add(write.accountId, write.month, write.megapixels, write.images, op);
          this.writes.delete(op);
        }
      } finally {
        this.flushing = undefined;
      }
    })();
    return this.flushing;
  }
}

/**
 * True when ioredis refused a command without sending it (disconnected, no offline queue): Redis
 * cannot have applied it. Any other failure (a timeout, a connection lost with the command
 * written) leaves its outcome unknown.
 */
export function neverSent(error: unknown): boolean {
  return error instanceof Error && /enableOfflineQueue options is false/.test(error.message);
}
