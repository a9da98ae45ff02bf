import type { AccountSummary } from '../account-summary.js';
import type { ErrorCode, ProblemDetails } from '../errors.js';
import type { CoreResponse } from '../http-types.js';
import type { Cutout } from '../pipeline/cutout.js';
import { jsonResponse } from '../pipeline/responses.js';
import { removeBgResultJson } from './result-json.js';

/**
 * remove.bg's answers from bgcut's: the result (binary, or JSON with `Accept: application/json`)
 * with remove.bg's headers, its error shape `{ errors: [{ title, code, detail }] }` with its
 * statuses, and its account document.
 */

/** Whether the caller asked for remove.bg's JSON answer. */
export function wantsJson(accept: string | string[] | undefined): boolean {
  return typeof accept === 'string' && /(^|,)\s*application\/json\s*(;|,|$)/i.test(accept);
}

export interface AnswerContext {
  json: boolean;
  /** X-Type, or undefined to leave it out (`type_level=none`). */
  reportedType: string | undefined;
  /** What the account's quota was charged, in its unit (1 per image on a plan without a quota). */
  credits: number;
  rateHeaders: Record<string, string>;
}

/** A successful cutout as remove.bg answers it. */
export function removeBgAnswer(cutout: Cutout, context: AnswerContext): CoreResponse {
  const { rendered } = cutout;
  const box = rendered.foreground ?? { top: 0, left: 0, width: 0, height: 0 };
  const headers: Record<string, string> = {
    ...context.rateHeaders,
    'cache-control': 'no-store',
    'x-width': String(rendered.width),
    'x-height': String(rendered.height),
    ...(context.reportedType ? { 'x-type': context.reportedType } : {}),
    'x-credits-charged': String(context.credits),
    'x-foreground-top': String(box.top),
    'x-foreground-left': String(box.left),
    'x-foreground-width': String(box.width),
    'x-foreground-height': String(box.height),
  };
  if (context.json) {
    // Made in the render's worker (the dialect's jsonAnswer): the image itself stayed there.
    const body = rendered.json ?? removeBgResultJson(rendered);
    return { status: 200, headers: { ...headers, 'content-type': 'application/json', 'content-length': String(body.length) }, body };
  }
  return {
    status: 200,
    headers: { ...headers, 'content-type': rendered.contentType, 'content-length': String(rendered.body.length) },
    body: rendered.body,
  };
}

/** bgcut's refusals that remove.bg names and answers differently: its code and status. */
const REMOVE_BG_ERRORS: Partial<Record<ErrorCode, { status: number; code: string }>> = {
  missing_api_key: { status: 403, code: 'auth_failed' },
  malformed_api_key: { status: 403, code: 'auth_failed' },
  invalid_api_key: { status: 403, code: 'auth_failed' },
  expired_api_key: { status: 403, code: 'auth_failed' },
  revoked_api_key: { status: 403, code: 'auth_failed' },
  multiple_api_keys: { status: 403, code: 'auth_failed' },
  api_key_wrong_header: { status: 403, code: 'auth_failed' },
  quota_exceeded: { status: 402, code: 'insufficient_credits' },
  rate_limited: { status: 429, code: 'rate_limit_exceeded' },
  concurrency_limited: { status: 429, code: 'rate_limit_exceeded' },
  plan_image_too_large: { status: 400, code: 'plan_image_too_large' },
  option_not_in_plan: { status: 400, code: 'option_not_in_plan' },
};

/** bgcut 4xx statuses kept as they are: the ones remove.bg has no word for (a method, Idempotency-Key, auth refusals that are not the key's). */
const KEPT_STATUS: ReadonlySet<string> = new Set([
  'method_not_allowed',
  'not_found',
  'invalid_idempotency_key',
  'idempotency_key_in_use',
  'idempotency_result_gone',
  'idempotency_key_reused',
  'account_suspended',
  'ip_not_allowed',
  'origin_not_allowed',
]);

/**
 * A bgcut problem+json answer as remove.bg's error: `{ errors: [{ title, code, detail }] }`,
 * with remove.bg's statuses (403 for any key problem, 402 out of credits, 429 rate limited, 400
 * for a bad request or image; 5xx as they are). The code is remove.bg's where it has one (auth_failed,
 * insufficient_credits, rate_limit_exceeded, unknown_foreground), else bgcut's. Headers (Retry-After,
 * X-RateLimit-*) pass through.
 */
export function removeBgError(response: CoreResponse): CoreResponse {
  if (!/^application\/problem\+json/.test(response.headers['content-type'] ?? '')) return response;
  const problem = JSON.parse(response.body.toString('utf8')) as ProblemDetails;
  const mapped = REMOVE_BG_ERRORS[problem.code];
  const status = mapped?.status ?? (response.status >= 500 || response.status < 400 || KEPT_STATUS.has(problem.code) ? response.status : 400);
  const { 'content-type': _type, 'content-length': _length, 'www-authenticate': _auth, ...headers } = response.headers;
  return jsonResponse(status, headers, { errors: [{ title: problem.title, code: mapped?.code ?? problem.code, detail: problem.detail }] });
}

/**
 * remove.bg's `GET /v1.0/account` from bgcut's summary: `credits.total` and `subscription` are
 * what is left of the monthly quota (in the plan's unit; null for a plan without one), `payg`
 * and `enterprise` 0, `free_calls` 0, `sizes` `preview` when the plan's output cap is at most
 * 0.25 MP, else `all`.
 */
export function removeBgAccount(summary: AccountSummary, headers: Record<string, string>): CoreResponse {
  const remaining = summary.quota ? summary.quota.remaining : null;
  const maxOutput = summary.plan.maxOutputMegapixels;
  return jsonResponse(200, { ...headers, 'cache-control': 'no-store' }, {
    data: {
      attributes: {
        credits: { total: remaining, subscription: remaining, payg: 0, enterprise: 0 },
        api: { free_calls: 0, sizes: maxOutput !== null && maxOutput <= 0.25 ? 'preview' : 'all' },
      },
    },
  });
}
