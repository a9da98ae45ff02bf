import { QUALITIES } from '../../core/image/multi-pass.js';
import type { DashboardContext } from '../context.js';
import { htmlResponse } from '../http.js';
import { tryPage } from '../pages/try.js';
import { holderRoute, type Route } from '../router.js';

/**
 * Try it: the page, and the route its script posts the image to, which runs the cutout for the
 * signed-in account through the endpoint's handler (the plan's limits apply; no key is involved).
 */
export function tryRoutes(ctx: DashboardContext): Route[] {
  const { handler } = ctx.config;
  return [
    holderRoute({
      method: 'GET',
      path: '/try',
      handle: async ({ visitor, account }) => {
        const summary = await handler.accountSummary(account);
        const allowed = (option: string) => !summary.plan.outputOptions || summary.plan.outputOptions.includes(option);
        return htmlResponse(
          200,
          tryPage(ctx.page(visitor), {
            formats: allowed('format') ? ['png', 'webp', 'jpg', 'avif'] : ['png'],
            canCrop: allowed('crop'),
            canColor: allowed('bg_color'),
            qualities: summary.plan.qualities ?? [...QUALITIES],
            models: summary.plan.models,
          }),
        );
      },
    }),
    holderRoute({ method: 'POST', path: '/try', csrf: 'header', handle: ({ request, account }) => handler.handleForAccount(request, account) }),
  ];
}
