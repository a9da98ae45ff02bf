import { lastDays } from '../../core/activity/recorder.js';
import type { DashboardContext } from '../context.js';
import { htmlResponse } from '../http.js';
import { usagePage, type DailyFigures } from '../pages/usage.js';
import { holderRoute, type Route } from '../router.js';

/** The usage page: this month, the rate limit now, the plan, and cutouts and refusals per day. */
export function usageRoutes(ctx: DashboardContext): Route[] {
  return [
    holderRoute({
      method: 'GET',
      path: '/usage',
      handle: async ({ visitor, account }) => {
        const days = lastDays(30);
        // The summary first: it reads the month's usage through the handler, which tells a store
        // that keeps usage per day (FileDashboardStore) that it is the one in use.
        const summary = await ctx.config.handler.accountSummary(account);
        const [requests, usage] = await Promise.all([ctx.activity.dailyCounts(account.id, days), ctx.config.store.dailyUsage?.(account.id, days)]);
        return htmlResponse(200, usagePage(ctx.page(visitor), { summary, daily: dailyFigures(days, requests, usage) }));
      },
    }),
  ];
}

/**
 * Per day: the charged cutouts (the records the month's total is the sum of), and the requests
 * that were not charged (refused or failed: counted requests less cutouts). Without per-day
 * usage (a store that keeps none) only the requests are known.
 */
function dailyFigures(days: string[], requests: number[], usage: Array<{ images: number }> | undefined): DailyFigures {
  if (!usage) return { days, requests };
  const cutouts = usage.map((u) => u.images);
  return { days, cutouts, refused: requests.map((n, i) => Math.max(0, n - (cutouts[i] ?? 0))) };
}
