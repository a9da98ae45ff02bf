import { randomUUID } from 'node:crypto';
import { ApiError } from '../errors.js';
import type { Insurance } from './insurance.js';
import { neverSent, type PendingUsage } from './pending-usage.js';
import { quotaCost, type MonthlyQuota } from './plans.js';
import type { QuotaStore } from './quota-store.js';
import { monthOf } from './usage-meter.js';

/** Quota counters outlive any month (their key names the month). */
export const QUOTA_TTL_SECONDS = 32 * 86400;

/**
 * Each account's monthly quota. A cutout's cost is reserved before the work (429 when it does not
 * fit) under an op of its own, and refunded under the same op if the cutout is not delivered, so
 * neither can apply twice. A charge whose reply is lost is undone when Redis answers again (the
 * request was answered 503 or charged to the insurance share instead).
 */
export class QuotaLimiter {
  constructor(
    private readonly shared: QuotaStore,
    private readonly fallback: QuotaStore,
    private readonly insurance: Insurance,
    private readonly pending: PendingUsage,
    /** Called after a write that reached the shared store: Redis is there, pending usage can go. */
    private readonly onSharedWrite: () => void,
  ) {}

  /** Reserves the cost; resolves with its refund. */
  async reserve(accountId: string, quota: MonthlyQuota, pixels: number, now: Date, weight: number, op: string = randomUUID()): Promise<() => Promise<void>> {
    const cost = quotaCost(quota, pixels, weight);
    // The key carries the month, so each calendar month starts afresh.
    const key = `${accountId}:${monthOf(now)}`;
    const { value: charged, fellBack } = await this.insurance.run(
      'quota store',
      undefined,
      () => this.shared.charge(key, cost, quota.amount, QUOTA_TTL_SECONDS, op),
      () => this.fallback.charge(key, cost, this.insurance.share(quota.amount), QUOTA_TTL_SECONDS, op),
      // Sent but unanswered: Redis may have charged it. Undone (or kept from applying) once it answers.
      (error) => {
        if (!neverSent(error)) this.pending.inDoubt(op, { kind: 'refund', key, cost });
      },
    );
    if (!charged) {
      throw new ApiError('quota_exceeded', {
        detail: `The plan's monthly quota of ${quota.amount} ${quota.unit} is used up.`,
        headers: { 'retry-after': String(secondsToNextMonth(now)) },
      });
    }
    if (fellBack) {
      // Charged to this instance's insurance share: Redis hears of it when it is back.
      this.pending.addQuota(key, cost);
      return async () => {
        await this.fallback.refund(key, cost, op);
        this.pending.addQuota(key, -cost);
      };
    }
    this.onSharedWrite();
    return async () => {
      // A refund Redis misses is made when it is back, under the same op: only successful cutouts are charged.
      await this.shared.refund(key, cost, op).catch(() => this.pending.inDoubt(op, { kind: 'refund', key, cost }));
    };
  }

  used(accountId: string, now: Date): Promise<number> {
    return this.shared.used(`${accountId}:${monthOf(now)}`);
  }
}

export function nextMonth(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
}

function secondsToNextMonth(now: Date): number {
  return Math.max(1, Math.ceil((nextMonth(now).getTime() - now.getTime()) / 1000));
}
