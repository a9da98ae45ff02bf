import { lastDays } from '../core/activity/recorder.js';
import type { Account } from '../core/auth/key-store.js';
import { NotFoundError, TooManyKeysError } from '../core/auth/key-records.js';
import type { CoreRequest, CoreResponse } from '../core/http-types.js';
import { loadAssets } from './assets.js';
import { checkOrigin, ownOrigin, tokensEqual } from './csrf.js';
import { BodyAlreadyReadError, discardBody, FormTooLargeError, htmlResponse, jsonProblem, readForm, redirect, withSecurityHeaders } from './http.js';
import { html } from './html.js';
import { parseKeyForm } from './key-form.js';
import { resolveDashboardOptions, type DashboardOptions } from './options.js';
import { accountPage } from './pages/account.js';
import { keysPage, keyStatus, newKeyPage, OVERLAPS, revokePage } from './pages/keys.js';
import { layout, type PageContext } from './pages/layout.js';
import { signInPage } from './pages/sign-in.js';
import { tryPage } from './pages/try.js';
import { usagePage } from './pages/usage.js';
import { hashPassword, passwordProblem, verifyPassword } from './passwords.js';
import { Sessions, type Visitor } from './sessions.js';
import { SignInThrottle } from './throttle.js';

export interface Dashboard {
  /** Where it expects to be mounted (the adapters mount it there). */
  basePath: string;
  /** Answers every request below basePath. Never rejects. */
  handle(request: CoreRequest): Promise<CoreResponse>;
}

/** Most keys an account may have that are not revoked or expired. */
export const MAX_ACTIVE_KEYS = 50;

/** Fixed messages a redirect may ask a page to show (never text taken from the URL). */
const NOTICES: Record<string, string> = {
  revoked: 'The key is revoked: requests with it now get 401.',
  'signed-out': 'You are signed out.',
  'password-changed': 'Password changed. Other browsers signed in to this account were signed out.',
};

/**
 * The account holders' dashboard, framework-neutral: sign-in, developer settings (keys), usage
 * and Try it, as server-rendered pages with one small script. Mount it with the Express or
 * Fastify dashboard adapter at `basePath`.
 */
export function createDashboard(options: DashboardOptions): Dashboard {
  const config = resolveDashboardOptions(options);
  const { basePath: base, handler, keyStore, store } = config;
  const embedded = !config.authenticateAccountHolder;
  const sessions = new Sessions(config);
  const throttle = new SignInThrottle(config.throttle ?? {}, config.redis, config.keyPrefix);
  const assets = loadAssets();
  const activity = config.activity ?? store;

  const context = (visitor: Visitor, title = ''): PageContext => ({
    base,
    title,
    product: config.productName,
    accountId: visitor.account?.id,
    csrfToken: visitor.csrfToken,
    embedded,
    signOutUrl: config.signOutUrl,
  });

  async function handle(request: CoreRequest): Promise<CoreResponse> {
    const https = request.protocol === 'https';
    try {
      const response = await route(request);
      return withSecurityHeaders(response, https);
    } catch (error) {
      discardBody(request.body);
      if (error instanceof FormTooLargeError) return withSecurityHeaders(simplePage(413, 'Too large', 'That form was larger than the dashboard accepts.'), https);
      if (error instanceof BodyAlreadyReadError) {
        config.onInternalError(error);
        return withSecurityHeaders(simplePage(500, 'Body already read', 'A body parser ahead of the dashboard read this form first (body_already_read): its operator must mount the dashboard before it.'), https);
      }
      config.onInternalError(error);
      return withSecurityHeaders(simplePage(503, 'Something went wrong', 'The dashboard could not complete that. Try again in a moment.'), https);
    }
  }

  function simplePage(status: number, title: string, text: string): CoreResponse {
    return htmlResponse(status, layout({ base, title, product: config.productName, csrfToken: '', embedded }, html`<p>${text}</p><p><a href="${base}/keys">Back to the dashboard</a></p>`));
  }

  async function route(request: CoreRequest): Promise<CoreResponse> {
    const url = new URL(request.url, 'http://dashboard.invalid');
    if (url.pathname !== base && !url.pathname.startsWith(`${base}/`)) return simplePage(404, 'Not found', 'There is no such page.');
    const path = url.pathname.slice(base.length) || '/';
    const method = request.method;
    const asset = assets.get(path);
    if (asset) return method === 'GET' || method === 'HEAD' ? asset : notAllowed('GET');

    const visitor = await sessions.visitor(request);
    const done = (response: CoreResponse) => sessions.finish(visitor, response);

    if (path === '/sign-in' && embedded) {
      if (method === 'GET') {
        if (visitor.account) return done(redirect(`${base}/keys`));
        return done(htmlResponse(200, signInPage(context(visitor), { next: safeNext(url.searchParams.get('next')), info: NOTICES[url.searchParams.get('notice') ?? ''] })));
      }
      if (method === 'POST') return done(await signIn(request, visitor));
      return notAllowed('GET, POST');
    }
    if (path === '/sign-out' && embedded) {
      if (method !== 'POST') return notAllowed('POST');
      const form = await readForm(request);
      if (!checkOrigin(request, config.trustedOrigins) || !tokensEqual(form.get('_csrf'), visitor.csrfToken)) return done(crossSite());
      await sessions.end(visitor);
      return done(redirect(`${base}/sign-in?notice=signed-out`));
    }

    if (!visitor.account) {
      discardBody(request.body);
      if (method !== 'GET' && method !== 'HEAD') return done(path === '/try' ? jsonProblem(401, 'not_signed_in', 'Sign in to the dashboard again.') : redirect(signInAddress(url)));
      return done(redirect(signInAddress(url)));
    }
    const account = visitor.account;
    // A suspended account may still look (keys, usage) and change its password, not make keys or try.
    if (account.status !== 'active' && method === 'POST' && path !== '/account/password') {
      discardBody(request.body);
      return done(simplePage(403, 'Account suspended', 'This account is suspended: its keys are refused. Contact support.'));
    }

    // Every state-changing request: from this site (Origin / Sec-Fetch-Site) and with this browser's token.
    if (method === 'POST') {
      if (path === '/try') {
        if (!checkOrigin(request, config.trustedOrigins) || !tokensEqual(header(request, 'x-csrf-token'), visitor.csrfToken)) {
          discardBody(request.body);
          return done(jsonProblem(403, 'cross_site_request', 'The request did not come from this dashboard. Reload the page.'));
        }
        return done(await handler.handleForAccount(request, account));
      }
      const form = await readForm(request);
      if (!checkOrigin(request, config.trustedOrigins) || !tokensEqual(form.get('_csrf'), visitor.csrfToken)) return done(crossSite());
      return done(await post(request, path, form, visitor, account));
    }
    if (method !== 'GET' && method !== 'HEAD') return notAllowed('GET, POST');
    return done(await get(path, visitor, account, url));
  }

  async function get(path: string, visitor: Visitor, account: Account, url: URL): Promise<CoreResponse> {
    const ctx = context(visitor);
    const info = NOTICES[url.searchParams.get('notice') ?? ''];
    if (path === '/') return redirect(`${base}/keys`);
    if (path === '/keys') return htmlResponse(200, keysPage(ctx, { keys: await keyRows(account.id), ...(info ? { info } : {}) }));
    const revoke = /^\/keys\/([A-Za-z0-9_]{1,64})\/revoke$/.exec(path);
    if (revoke) {
      const record = await ownKey(account.id, revoke[1]!);
      if (!record || keyStatus(record) === 'revoked') return simplePage(404, 'No such key', 'This account has no such key, or it is revoked already.');
      return htmlResponse(200, revokePage(ctx, record));
    }
    if (path === '/usage') {
      const days = lastDays(30);
      const [summary, counts] = await Promise.all([handler.accountSummary(account), activity.dailyCounts(account.id, days)]);
      return htmlResponse(200, usagePage(ctx, { summary, days, counts }));
    }
    if (path === '/try') {
      const summary = await handler.accountSummary(account);
      const allowed = (option: string) => !summary.plan.outputOptions || summary.plan.outputOptions.includes(option);
      return htmlResponse(200, tryPage(ctx, { formats: allowed('format') ? ['png', 'webp', 'jpg', 'avif'] : ['png'], canCrop: allowed('crop'), canColor: allowed('bg_color') }));
    }
    if (path === '/account' && embedded) return htmlResponse(200, accountPage(ctx, { email: visitor.session?.email ?? '', ...(info ? { info } : {}) }));
    return simplePage(404, 'Not found', 'There is no such page.');
  }

  async function post(request: CoreRequest, path: string, form: URLSearchParams, visitor: Visitor, account: Account): Promise<CoreResponse> {
    const ctx = context(visitor);
    if (path === '/keys') {
      const parsed = parseKeyForm(form);
      const rows = await keyRows(account.id);
      if ('error' in parsed) return htmlResponse(400, keysPage(ctx, { keys: rows, error: parsed.error, form }));
      // The ceiling is checked by the store in the same step as the write: parallel posts cannot pass it.
      const created = await keyStore.createKey({ accountId: account.id, plan: account.plan, ...parsed, maxActiveKeys: MAX_ACTIVE_KEYS }).catch((error: unknown) => {
        if (error instanceof TooManyKeysError) return error;
        throw error;
      });
      if (created instanceof TooManyKeysError) return htmlResponse(400, keysPage(ctx, { keys: rows, error: created.message, form }));
      return htmlResponse(201, newKeyPage(ctx, { ...created, endpointUrl: endpointUrl(request) }));
    }
    const action = /^\/keys\/([A-Za-z0-9_]{1,64})\/(rotate|revoke)$/.exec(path);
    if (action) {
      const record = await ownKey(account.id, action[1]!);
      if (!record || keyStatus(record) !== 'active') return simplePage(404, 'No such key', 'This account has no such active key.');
      if (action[2] === 'revoke') {
        await keyStore.revokeKey(record.id);
        return redirect(`${base}/keys?notice=revoked`);
      }
      const overlap = OVERLAPS.find(([value]) => value === form.get('overlap'));
      if (!overlap) return htmlResponse(400, keysPage(ctx, { keys: await keyRows(account.id), error: 'Pick how long the old key keeps working.' }));
      const rotated = await keyStore.rotateKey(record.id, overlap[1]).catch((error: unknown) => {
        if (error instanceof NotFoundError) return undefined;
        throw error;
      });
      if (!rotated) return simplePage(404, 'No such key', 'This account has no such active key.');
      return htmlResponse(201, newKeyPage(ctx, { key: rotated.key, record: rotated.record, rotated: rotated.old, endpointUrl: endpointUrl(request) }));
    }
    if (path === '/account/password' && embedded && visitor.session) return changePassword(form, visitor, account);
    return simplePage(404, 'Not found', 'There is no such page.');
  }

  async function signIn(request: CoreRequest, visitor: Visitor): Promise<CoreResponse> {
    const form = await readForm(request);
    if (!checkOrigin(request, config.trustedOrigins) || !tokensEqual(form.get('_csrf'), visitor.csrfToken)) return crossSite();
    const email = (form.get('email') ?? '').trim().toLowerCase().slice(0, 254);
    const password = form.get('password') ?? '';
    const next = safeNext(form.get('next'));
    const address = request.clientIp ?? 'unknown';
    const page = (status: number, error: string, headers: Record<string, string> = {}) =>
      htmlResponse(status, signInPage(context(visitor), { email, error, ...(next ? { next } : {}) }), headers);
    const locked = await throttle.lockedFor(email, address);
    if (locked > 0) return tooMany(page, locked);
    const holder = email ? await store.findHolder(email) : undefined;
    if (!(await verifyPassword(password, holder?.passwordHash)) || !holder) {
      await throttle.failed(email, address);
      const nowLocked = await throttle.lockedFor(email, address);
      if (nowLocked > 0) return tooMany(page, nowLocked);
      return page(401, 'Wrong email or password.');
    }
    await throttle.succeeded(email);
    await sessions.start(visitor, holder.accountId, holder.email);
    return redirect(next ?? `${base}/keys`);
  }

  function tooMany(page: (status: number, error: string, headers?: Record<string, string>) => CoreResponse, seconds: number): CoreResponse {
    const minutes = Math.ceil(seconds / 60);
    return page(429, `Too many failed sign-ins. Try again in ${minutes} minute${minutes === 1 ? '' : 's'}.`, { 'retry-after': String(seconds) });
  }

  async function changePassword(form: URLSearchParams, visitor: Visitor, account: Account): Promise<CoreResponse> {
    const session = visitor.session!;
    const ctx = context(visitor);
    const page = (status: number, error: string) => htmlResponse(status, accountPage(ctx, { email: session.email, error }));
    const holder = await store.findHolder(session.email);
    if (!holder || holder.accountId !== account.id) return page(400, 'This sign-in no longer exists.');
    const locked = await throttle.lockedFor(holder.email, 'password-change');
    if (locked > 0) return page(429, 'Too many wrong passwords. Try again later.');
    if (!(await verifyPassword(form.get('current') ?? '', holder.passwordHash))) {
      await throttle.failed(holder.email, 'password-change');
      return page(400, 'The current password is wrong.');
    }
    const fresh = form.get('new') ?? '';
    const problem = passwordProblem(fresh);
    if (problem) return page(400, problem);
    if (fresh !== form.get('confirm')) return page(400, 'The two new passwords differ.');
    await store.setHolder({ ...holder, passwordHash: await hashPassword(fresh), updatedAt: new Date().toISOString() });
    await store.deleteSessionsOf(account.id, visitor.sessionIdHash);
    return redirect(`${base}/account?notice=password-changed`);
  }

  async function keyRows(accountId: string) {
    const records = (await keyStore.listKeys(accountId)).sort((a, b) => b.createdAt.localeCompare(a.createdAt));
    const used = await activity.lastUsed(records.map((r) => r.id));
    return records.map((record) => ({ record, lastUsed: used[record.id] }));
  }

  async function ownKey(accountId: string, keyId: string) {
    return (await keyStore.listKeys(accountId)).find((k) => k.id === keyId);
  }

  function endpointUrl(request: CoreRequest): string {
    return config.endpointUrl ?? `${ownOrigin(request) ?? ''}/v1/remove-bg`;
  }

  function signInAddress(url: URL): string {
    const next = `${url.pathname}${url.search}`;
    if (embedded) return `${base}/sign-in?next=${encodeURIComponent(next)}`;
    const target = config.signInUrl!;
    return `${target}${target.includes('?') ? '&' : '?'}next=${encodeURIComponent(next)}`;
  }

  /** Only a path inside the dashboard may be a place to return to after sign-in. */
  function safeNext(next: string | null): string | undefined {
    if (!next || next.length > 500 || !next.startsWith(`${base}/`) || next.startsWith('//') || /[\\\s]/.test(next)) return undefined;
    return next;
  }

  function crossSite(): CoreResponse {
    return simplePage(403, 'Request refused', 'This request did not come from this dashboard (another site, or a page too old). Go back, reload the page and try again.');
  }

  function notAllowed(allow: string): CoreResponse {
    const page = simplePage(405, 'Not allowed', 'That method is not used here.');
    return { ...page, headers: { ...page.headers, allow } };
  }

  return { basePath: base, handle };
}

function header(request: CoreRequest, name: string): string | undefined {
  const value = request.headers[name];
  return typeof value === 'string' ? value : undefined;
}
