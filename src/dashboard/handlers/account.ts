import type { CoreResponse } from '../../core/http-types.js';
import type { DashboardContext } from '../context.js';
import { htmlResponse, redirect } from '../http.js';
import { accountPage } from '../pages/account.js';
import { passwordProblem } from '../passwords.js';
import { holderRoute, type Route, type RouteInput } from '../router.js';

/** The account page (embedded sign-in only): the holder changes their password. */
export function accountRoutes(ctx: DashboardContext): Route[] {
  const { base, config, throttle, passwords } = ctx;

  async function changePassword({ visitor, account, form }: RouteInput): Promise<CoreResponse> {
    const session = visitor.session;
    if (!session) return ctx.notFound();
    const page = (status: number, error: string) => htmlResponse(status, accountPage(ctx.page(visitor), { email: session.email, error }));
    const holder = await config.store.findHolder(session.email);
    if (!holder || holder.accountId !== account.id) return page(400, 'This sign-in no longer exists.');
    // Per account and apart from sign-in: wrong guesses here never lock the holder out of signing in.
    const attempt = await throttle.passwordChange(account.id);
    if (!attempt.allowed) return page(429, 'Too many wrong passwords. Try again later.');
    const check = await passwords.verify(form.get('current') ?? '', holder.passwordHash);
    if ((await attempt.settle(check.valid)) > 0) return page(429, 'Too many wrong passwords. Try again later.');
    if (!check.valid) return page(400, 'The current password is wrong.');
    const fresh = form.get('new') ?? '';
    const problem = passwordProblem(fresh);
    if (problem) return page(400, problem);
    if (fresh !== form.get('confirm')) return page(400, 'The two new passwords differ.');
    await config.store.setHolder({ ...holder, passwordHash: await passwords.hash(fresh), updatedAt: new Date().toISOString() });
    await config.store.deleteSessionsOf(account.id, visitor.sessionIdHash);
    return redirect(`${base}/account?notice=password-changed`);
  }

  return [
    holderRoute({
      method: 'GET',
      path: '/account',
      embeddedOnly: true,
      handle: async ({ visitor, url }) => {
        const info = ctx.notice(url);
        return htmlResponse(200, accountPage(ctx.page(visitor), { email: visitor.session?.email ?? '', ...(info ? { info } : {}) }));
      },
    }),
    // A suspended account may still change its password.
    holderRoute({ method: 'POST', path: '/account/password', embeddedOnly: true, csrf: 'form', whileSuspended: true, handle: changePassword }),
  ];
}
