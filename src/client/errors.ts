import type { ErrorCode } from '../core/errors.js';

/** A problem `code` of the API; unknown future codes still arrive as strings. */
export type ProblemCode = ErrorCode | (string & {});

/** The API's problem+json body (RFC 9457). */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: ProblemCode;
}

/** Where the account stands against its per-minute limit, from the response headers. */
export interface RateLimitStanding {
  limit: number;
  remaining: number;
  resetSeconds: number;
}

/** Every error the client throws, except the caller's own abort (an AbortError DOMException). */
export class BgcutError extends Error {
  override name = 'BgcutError';
}

/** The API answered with a problem: branch on `code` (or on the subclass). */
export class BgcutApiError extends BgcutError {
  override name = 'BgcutApiError';
  readonly status: number;
  readonly code: ProblemCode;
  readonly problem: Problem;
  /** Seconds the server asked to wait (429, 503), if it said. */
  readonly retryAfterSeconds: number | undefined;
  readonly rateLimit: RateLimitStanding | undefined;
  /** Attempts made, retries included. */
  readonly attempts: number;

  constructor(problem: Problem, details: { retryAfterSeconds?: number | undefined; rateLimit?: RateLimitStanding | undefined; attempts: number }) {
    super(`${problem.status} ${problem.code}: ${problem.detail}`);
    this.status = problem.status;
    this.code = problem.code;
    this.problem = problem;
    this.retryAfterSeconds = details.retryAfterSeconds;
    this.rateLimit = details.rateLimit;
    this.attempts = details.attempts;
  }
}

/** 401: no key, or a key that is unknown, malformed, expired, revoked or in the wrong header. */
export class AuthenticationError extends BgcutApiError {
  override name = 'AuthenticationError';
}
/** 403: identified, but refused (suspended account, address, origin, plan limits). */
export class PermissionDeniedError extends BgcutApiError {
  override name = 'PermissionDeniedError';
}
/** 429: over the plan's rate, concurrency or monthly quota, after any retries. */
export class RateLimitError extends BgcutApiError {
  override name = 'RateLimitError';
}
/** 4xx about the request itself: the image, the options, the upload or the image URL. */
export class InvalidRequestError extends BgcutApiError {
  override name = 'InvalidRequestError';
}
/** 5xx: the service could not do it now (503 after any retries, 504, 500). */
export class ServiceError extends BgcutApiError {
  override name = 'ServiceError';
}

/** An attempt took longer than `timeoutMs`. */
export class BgcutTimeoutError extends BgcutError {
  override name = 'BgcutTimeoutError';
}

/** The API could not be reached, or its answer was not one it gives. */
export class BgcutConnectionError extends BgcutError {
  override name = 'BgcutConnectionError';
}

export function apiErrorOf(problem: Problem, details: ConstructorParameters<typeof BgcutApiError>[1]): BgcutApiError {
  const status = problem.status;
  const Kind =
    status === 401 ? AuthenticationError : status === 403 ? PermissionDeniedError : status === 429 ? RateLimitError : status >= 500 ? ServiceError : InvalidRequestError;
  return new Kind(problem, details);
}
