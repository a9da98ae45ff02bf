import type { CoreRequest, CoreResponse } from '../core/http-types.js';
import { loadAssets } from './assets.js';
import { DashboardContext } from './context.js';
import { checkOrigin, tokensEqual } from './csrf.js';
import { accountRoutes } from './handlers/account.js';
import { keysRoutes } from './handlers/keys.js';
import { signInRoutes } from './handlers/sign-in.js';
import { tryRoutes } from './handlers/try.js';
import { usageRoutes } from './handlers/usage.js';
import { webhooksRoutes } from './handlers/webhooks.js';
import { BodyAlreadyReadError, discardBody, FormTooLargeError, jsonProblem, readForm, redirect, withSecurityHeaders } from './http.js';
import { resolveDashboardOptions, type DashboardOptions } from './options.js';
import { PasswordHasher } from './passwords.js';
import { RouteTable } from './router.js';
import { Sessions } from './sessions.js';
import { SignInThrottle } from './throttle.js';

export { MAX_ACTIVE_KEYS } from './handlers/keys.js';

export interface Dashboard {
  /** Where it expects to be mounted (the adapters mount it there). */
  basePath: string;
  /** Answers every request below basePath. Never rejects. */
  handle(request: CoreRequest): Promise<CoreResponse>;
}

/**
 * The account holders' dashboard, framework-neutral: sign-in, developer settings (keys), usage
 * and Try it, as server-rendered pages with one small script. Mount it with the Express or
 * Fastify dashboard adapter at `basePath`.
 *
 * This module is the router: a route table built from one handler module per page
 * (handlers/), and the checks every route shares, made here once: who may (signed in or not,
 * suspended), where a post came from (Origin and anti-forgery token), which methods.
 */
export function createDashboard(options: DashboardOptions): Dashboard {
  const config = resolveDashboardOptions(options);
  const sessions = new Sessions(config);
  const throttle = new SignInThrottle(config.throttle ?? {}, config.redis, config.keyPrefix);
  const ctx = new DashboardContext(config, sessions, throttle, config.passwordHasher ?? new PasswordHasher());
  const { base } = ctx;
  const assets = loadAssets();
  const routes = new RouteTable([...signInRoutes(ctx), ...keysRoutes(ctx), ...usageRoutes(ctx), ...tryRoutes(ctx), ...webhooksRoutes(ctx), ...accountRoutes(ctx)]);

  async function handle(request: CoreRequest): Promise<CoreResponse> {
    const https = request.protocol === 'https';
    try {
      const response = await route(request);
      return withSecurityHeaders(response, https);
    } catch (error) {
      discardBody(request.body);
      if (error instanceof FormTooLargeError) return withSecurityHeaders(ctx.simplePage(413, 'Too large', 'That form was larger than the dashboard accepts.'), https);
      if (error instanceof BodyAlreadyReadError) {
        config.onInternalError(error);
        return withSecurityHeaders(ctx.simplePage(500, 'Body already read', 'A body parser ahead of the dashboard read this form first (body_already_read): its operator must mount the dashboard before it.'), https);
      }
      config.onInternalError(error);
      return withSecurityHeaders(ctx.simplePage(503, 'Something went wrong', 'The dashboard could not complete that. Try again in a moment.'), https);
    }
  }

  async function route(request: CoreRequest): Promise<CoreResponse> {
    const url = new URL(request.url, 'http://dashboard.invalid');
    if (url.pathname !== base && !url.pathname.startsWith(`${base}/`)) return ctx.notFound();
    const path = url.pathname.slice(base.length) || '/';
    const method = request.method === 'HEAD' ? 'GET' : request.method;
    const asset = assets.get(path);
    if (asset) return method === 'GET' ? asset : ctx.notAllowed('GET');

    const visitor = await sessions.visitor(request);
    const done = (response: CoreResponse) => sessions.finish(visitor, response);
    const refuse = (response: CoreResponse) => {
      discardBody(request.body);
      return done(response);
    };
    const matches = routes.match(path, ctx.embedded);
    const chosen = matches.find((m) => m.route.method === method);

    // Everything but the sign-in pages is for signed-in holders: anyone else is sent to sign in.
    if (!visitor.account && (chosen ? chosen.route.access === 'holder' : matches.every((m) => m.route.access === 'holder'))) {
      if (chosen?.route.csrf === 'header') return refuse(jsonProblem(401, 'not_signed_in', 'Sign in to the dashboard again.'));
      return refuse(redirect(ctx.signInAddress(url)));
    }
    if (!chosen) return refuse(matches.length ? ctx.notAllowed(matches.map((m) => m.route.method).join(', '), visitor) : ctx.notFound(visitor));
    const { route: r, params } = chosen;
    const account = visitor.account;

    // A suspended account may still look (keys, usage) and change its password, not make keys or try.
    if (account && account.status !== 'active' && r.method === 'POST' && !r.whileSuspended) {
      return refuse(ctx.simplePage(403, 'Account suspended', 'This account is suspended: its keys are refused. Contact support.', visitor));
    }

    // Every state-changing request: from this site (Origin / Sec-Fetch-Site) and with this browser's token.
    let form = new URLSearchParams();
    if (r.csrf === 'header') {
      if (!checkOrigin(request, config.trustedOrigins) || !tokensEqual(header(request, 'x-csrf-token'), visitor.csrfToken)) {
        return refuse(jsonProblem(403, 'cross_site_request', 'The request did not come from this dashboard. Reload the page.'));
      }
    } else if (r.csrf === 'form') {
      form = await readForm(request);
      if (!checkOrigin(request, config.trustedOrigins) || !tokensEqual(form.get('_csrf'), visitor.csrfToken)) return done(ctx.crossSite(visitor));
    }
    return done(await r.handle({ request, url, params, visitor, account, form }));
  }

  return { basePath: base, handle };
}

function header(request: CoreRequest, name: string): string | undefined {
  const value = request.headers[name];
  return typeof value === 'string' ? value : undefined;
}
