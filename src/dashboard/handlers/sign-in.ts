import type { CoreResponse } from '../../core/http-types.js';
import type { DashboardContext } from '../context.js';
import { htmlResponse, redirect } from '../http.js';
import { signInPage } from '../pages/sign-in.js';
import type { Route, RouteInput } from '../router.js';

/** The embedded sign-in page, its form, and sign-out. */
export function signInRoutes(ctx: DashboardContext): Route[] {
  const { base, sessions, throttle, passwords, config } = ctx;

  async function signIn({ request, visitor, form }: RouteInput): Promise<CoreResponse> {
    const email = (form.get('email') ?? '').trim().toLowerCase().slice(0, 254);
    const password = form.get('password') ?? '';
    const next = ctx.safeNext(form.get('next'));
    const address = request.clientIp ?? 'unknown';
    const page = (status: number, error: string, headers: Record<string, string> = {}) =>
      htmlResponse(status, signInPage(ctx.page(visitor), { email, error, ...(next ? { next } : {}) }), headers);
    const tooMany = (seconds: number) => {
      const minutes = Math.ceil(seconds / 60);
      return page(429, `Too many failed sign-ins. Try again in ${minutes} minute${minutes === 1 ? '' : 's'}.`, { 'retry-after': String(seconds) });
    };
    // Counted before the password is checked, so parallel guesses cannot all get through.
    const attempt = await throttle.signIn(email, address);
    if (!attempt.allowed) return tooMany(attempt.retryAfterSeconds);
    const holder = email ? await config.store.findHolder(email) : undefined;
    const check = await passwords.verify(password, holder?.passwordHash);
    const lockedFor = await attempt.settle(check.valid && holder !== undefined);
    if (!check.valid || !holder) {
      if (lockedFor > 0) return tooMany(lockedFor);
      // Warned on the answer before the try that locks, not only once it has.
      if (attempt.remaining === 1) {
        const minutes = Math.ceil(attempt.lockSecondsAfterLast / 60);
        return page(401, `Wrong email or password. One more wrong password locks sign-in for ${minutes} minute${minutes === 1 ? '' : 's'}.`);
      }
      return page(401, 'Wrong email or password.');
    }
    // Stored at another cost (an older default): store it again at today's while the password is at hand.
    // A failed rewrite is reported, not shown: the old hash still works, the next sign-in tries again.
    if (check.needsRehash) {
      await config.store.setHolder({ ...holder, passwordHash: await passwords.hash(password), updatedAt: new Date().toISOString() }).catch(config.onInternalError);
    }
    await sessions.start(visitor, holder.accountId, holder.email);
    return redirect(next ?? `${base}/keys`);
  }

  return [
    {
      method: 'GET',
      path: '/sign-in',
      access: 'anyone',
      embeddedOnly: true,
      handle: async ({ visitor, url }) => {
        if (visitor.account) return redirect(`${base}/keys`);
        const info = ctx.notice(url);
        return htmlResponse(200, signInPage(ctx.page(visitor), { next: ctx.safeNext(url.searchParams.get('next')), ...(info ? { info } : {}) }));
      },
    },
    { method: 'POST', path: '/sign-in', access: 'anyone', embeddedOnly: true, csrf: 'form', handle: signIn },
    {
      method: 'POST',
      path: '/sign-out',
      access: 'anyone',
      embeddedOnly: true,
      csrf: 'form',
      handle: async ({ visitor }) => {
        await sessions.end(visitor);
        return redirect(`${base}/sign-in?notice=signed-out`);
      },
    },
  ];
}
