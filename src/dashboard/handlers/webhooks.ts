import type { DashboardContext } from '../context.js';
import { htmlResponse } from '../http.js';
import { webhooksPage } from '../pages/webhooks.js';
import { holderRoute, type Route } from '../router.js';

/** The webhooks page: the account's signing secret (made and replaced here) and its latest deliveries. */
export function webhooksRoutes(ctx: DashboardContext): Route[] {
  const webhooks = ctx.config.webhooks;
  const view = async (accountId: string, newSecret?: string) => ({
    enabled: Boolean(webhooks),
    hasSecret: Boolean(newSecret ?? (await webhooks?.secrets.get(accountId))),
    newSecret,
    deliveries: (await webhooks?.deliveries?.list(accountId, 50)) ?? [],
  });
  return [
    holderRoute({
      method: 'GET',
      path: '/webhooks',
      handle: async ({ visitor, account }) => htmlResponse(200, webhooksPage(ctx.page(visitor), await view(account.id)), { 'cache-control': 'no-store' }),
    }),
    holderRoute({
      method: 'POST',
      path: '/webhooks/secret',
      csrf: 'form',
      handle: async ({ visitor, account }) => {
        if (!webhooks) return htmlResponse(404, webhooksPage(ctx.page(visitor), await view(account.id)));
        const secret = await webhooks.secrets.rotate(account.id);
        // Shown in this answer only (no redirect: the secret must not sit in a URL or a later page).
        return htmlResponse(200, webhooksPage(ctx.page(visitor), await view(account.id, secret)), { 'cache-control': 'no-store' });
      },
    }),
  ];
}
