/**
 * What the example apps answer when their own parts fail (a body parser's refusal, an unknown
 * path, a route that threw): problem+json with a stable code, as bgcut's own answers, and never
 * a stack trace, a file path or the error's own message (which may hold either).
 */
import { ApiError, problemOf, type ErrorCode } from '../src/core/index.js';

export interface ExampleProblem {
  status: number;
  contentType: 'application/problem+json';
  body: string;
}

/** body-parser's error types (express.json, express.urlencoded) and Fastify's / Hono's codes, by what bgcut calls them. */
const PARSER_ERRORS: Record<string, ErrorCode> = {
  'entity.too.large': 'upload_too_large',
  FST_ERR_CTP_BODY_TOO_LARGE: 'upload_too_large',
  'entity.parse.failed': 'malformed_json',
  FST_ERR_CTP_INVALID_JSON_BODY: 'malformed_json',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'malformed_json',
};

/**
 * The problem for an error thrown in an example app: a parser's refusal by its type or code; any
 * other 4xx as `bad_request`; everything else `internal_error` (logged by the caller, not sent).
 */
export function exampleProblem(error: unknown): ExampleProblem {
  const { type, code, status, statusCode } = (error ?? {}) as { type?: unknown; code?: unknown; status?: unknown; statusCode?: unknown };
  const httpStatus = Number(status ?? statusCode);
  const known = PARSER_ERRORS[String(type)] ?? PARSER_ERRORS[String(code)];
  const problemCode: ErrorCode = known ?? (httpStatus >= 400 && httpStatus < 500 ? 'bad_request' : 'internal_error');
  const problem = problemOf(new ApiError(problemCode));
  // A 4xx keeps the status its parser chose (415 for a charset it cannot read, 413, 400).
  const finalStatus = httpStatus >= 400 && httpStatus < 500 ? httpStatus : problem.status;
  return { status: finalStatus, contentType: 'application/problem+json', body: JSON.stringify({ ...problem, status: finalStatus }) };
}

export function notFoundProblem(): ExampleProblem {
  return { status: 404, contentType: 'application/problem+json', body: JSON.stringify(problemOf(new ApiError('not_found'))) };
}
