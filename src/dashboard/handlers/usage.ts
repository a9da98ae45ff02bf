import { lastDays } from '../../core/activity/recorder.js';
import type { DashboardContext } from '../context.js';
import { htmlResponse } from '../http.js';
import { usagePage } from '../pages/usage.js';
import { holderRoute, type Route } from '../router.js';

/** The usage page: this month, the rate limit now, the plan, and requests per day. */
export function usageRoutes(ctx: DashboardContext): Route[] {
  return [
    holderRoute({
      method: 'GET',
      path: '/usage',
      handle: async ({ visitor, account }) => {
        const days = lastDays(30);
        const [summary, counts] = await Promise.all([ctx.config.handler.accountSummary(account), ctx.activity.dailyCounts(account.id, days)]);
        return htmlResponse(200, usagePage(ctx.page(visitor), { summary, days, counts }));
      },
    }),
  ];
}
