import { ApiError } from '../errors.js';
import type { CoreRequest, CoreResponse } from '../http-types.js';
import { rateLimitHeaders, type PlanEnforcer } from '../limits/plan-enforcer.js';
import type { ApiMetrics } from '../metrics.js';
import type { AccessLogEntry } from '../options.js';
import { settleBody } from '../../util/settle-body.js';
import { openRequestScope, type RequestScope } from './request-scope.js';
import { problemResponse } from './responses.js';

export interface RespondDeps {
  enforcer: PlanEnforcer;
  metrics: ApiMetrics;
  uploadTimeoutMs: number;
  /** Most bytes of an admitted request's body read and discarded, when it is refused, before the connection is dropped. */
  drainCapBytes: number;
  problemTypeBase: string;
  onResponse?: ((entry: AccessLogEntry) => void) | undefined;
  onInternalError: (error: unknown) => void;
  /** Open scopes, so a shutdown that runs out of time can end them. */
  open: Set<AbortController>;
}

/** Most bytes of a refused, never admitted request's body read before its connection is closed. */
export const UNADMITTED_DRAIN_BYTES = 64 * 1024;

/** 5xx answers that report the service's state (busy, down, slow), not a fault to investigate. */
const SERVICE_STATE = new Set(['inference_unavailable', 'inference_timeout', 'server_busy']);

/** Faults worth an operator's look: 5xx that are not the service's state, and backing stores that failed. */
function isFault(error: ApiError): boolean {
  if (error.status < 500 || SERVICE_STATE.has(error.code)) return false;
  return error.code !== 'service_unavailable' || error.cause !== undefined;
}

/**
 * Runs one route's steps in a request scope, and whatever path they leave by: turns a failure
 * into a problem response, gives back everything the request held, counts and logs the outcome
 * (a client that went away is logged as `client_closed`, not as the error its leaving caused).
 */
export async function respond(
  route: string,
  request: CoreRequest,
  deps: RespondDeps,
  steps: (scope: RequestScope) => Promise<CoreResponse>,
): Promise<CoreResponse> {
  const started = performance.now();
  const shutdown = new AbortController();
  deps.open.add(shutdown);
  const scope = openRequestScope({ ...request, signal: AbortSignal.any([request.signal, shutdown.signal]) }, deps.uploadTimeoutMs);
  const report = (error: unknown) => safely(() => deps.onInternalError(error));
  let response: CoreResponse;
  let code: string | undefined;
  try {
    response = await steps(scope);
  } catch (thrown) {
    // A request refused before admission (no key, a bad one, over a limit) is counted nowhere:
    // reading its body for it must cost little. One that was let in may be answered mid-upload
    // (a file over the limit), so its client, still sending, gets more room to read the answer.
    settleBody(request.body, scope.admitted ? deps.drainCapBytes : UNADMITTED_DRAIN_BYTES);
    const reason: unknown = scope.signal.reason;
    const error = reason instanceof ApiError && reason.code === 'client_closed' ? reason : asApiError(thrown, report);
    code = error.code;
    let headers = scope.rateHeaders;
    // Every answer to an identified account carries its rate-limit headers, refusals too.
    if (scope.identity && Object.keys(headers).length === 0 && code !== 'client_closed') {
      const standing = await deps.enforcer.standing(scope.identity.account.id, scope.identity.account.plan).catch(() => undefined);
      if (standing) headers = rateLimitHeaders(standing.rate);
    }
    response = problemResponse(error, { ...headers, ...error.headers }, deps.problemTypeBase);
  } finally {
    await scope.end(report);
    deps.open.delete(shutdown);
  }
  const durationMs = performance.now() - started;
  deps.metrics.requests.inc({ route, status: String(response.status), code: code ?? '' });
  deps.metrics.duration.observe({ route }, durationMs / 1000);
  deps.metrics.bytesOut.inc(response.body.length);
  const identity = scope.identity;
  safely(() =>
    deps.onResponse?.({
      method: request.method,
      route,
      status: response.status,
      ...(code ? { code } : {}),
      ...(identity ? { keyId: identity.keyId, accountId: identity.account.id } : {}),
      durationMs: Math.round(durationMs),
      bytesOut: response.body.length,
    }),
  );
  return response;
}

function asApiError(error: unknown, report: (error: unknown) => void): ApiError {
  if (error instanceof ApiError) {
    if (isFault(error)) report(error.cause ?? error);
    return error;
  }
  report(error);
  return new ApiError('internal_error', { cause: error });
}

/** A host's hook that throws must not break the response: its failure goes to stderr instead. */
function safely(hook: () => void): void {
  try {
    hook();
  } catch (error) {
    console.error('bgcut: a hook threw:', error instanceof Error ? error.message : String(error));
  }
}
