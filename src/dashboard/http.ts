import type { Readable } from 'node:stream';
import type { CoreRequest, CoreResponse } from '../core/http-types.js';
import type { SafeHtml } from './html.js';
import { BodyReadError, readBody } from '../util/read-body.js';
import { settleBody } from '../util/settle-body.js';

/**
 * Every dashboard page: scripts and styles only from the dashboard's own files (no inline
 * script), never framed, no referrer leaked to other sites, never cached (pages show keys).
 */
export const PAGE_SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  // same-origin, not no-referrer: under no-referrer Chrome sends `Origin: null` on form posts,
  // which the cross-site check must refuse.
  'referrer-policy': 'same-origin',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'permissions-policy': 'camera=(), microphone=(), geolocation=()',
  'cache-control': 'no-store',
};

export function withSecurityHeaders(response: CoreResponse, https: boolean): CoreResponse {
  const headers = { ...PAGE_SECURITY_HEADERS, ...response.headers };
  if (https) headers['strict-transport-security'] = 'max-age=31536000';
  return { ...response, headers };
}

export function htmlResponse(status: number, page: SafeHtml, headers: Record<string, string> = {}): CoreResponse {
  const body = Buffer.from(`<!doctype html>\n${page.value}`);
  return { status, headers: { ...headers, 'content-type': 'text/html; charset=utf-8', 'content-length': String(body.length) }, body };
}

/** 303 See Other: after a form post, the browser GETs the next page. */
export function redirect(location: string, headers: Record<string, string> = {}): CoreResponse {
  return { status: 303, headers: { ...headers, location, 'content-length': '0' }, body: Buffer.alloc(0) };
}

export function jsonProblem(status: number, code: string, detail: string): CoreResponse {
  const body = Buffer.from(JSON.stringify({ type: `urn:bgcut:problem:${code}`, title: detail, status, code, detail }));
  return { status, headers: { 'content-type': 'application/problem+json', 'content-length': String(body.length) }, body };
}

/** Largest form the dashboard reads (its forms are a few short fields). */
export const MAX_FORM_BYTES = 16 * 1024;

export class FormTooLargeError extends Error {}

/**
 * A body the dashboard will not use (a refused or unexpected request): read and dropped so the
 * client gets the answer on a live connection, but only up to a bound (the endpoint's own
 * settleBody); past it the connection is closed, so nobody can make the server read an endless
 * upload.
 */
export function discardBody(body: Readable, capBytes = 64 * 1024): void {
  settleBody(body, capBytes);
}

/**
 * Reads an `application/x-www-form-urlencoded` body of at most MAX_FORM_BYTES, within the
 * request's life (its signal). A body a host's parser consumed first is refused at once with
 * BodyAlreadyReadError, never waited for.
 */
export async function readForm(request: CoreRequest): Promise<URLSearchParams> {
  const type = String(request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/x-www-form-urlencoded') {
    discardBody(request.body);
    return new URLSearchParams();
  }
  try {
    const raw = await readBody(request.body, { maxBytes: MAX_FORM_BYTES, declaredLength: request.headers['content-length'] as string | undefined, signal: request.signal });
    return new URLSearchParams(raw.toString('utf8'));
  } catch (error) {
    if (error instanceof BodyReadError && error.reason === 'too_large') throw new FormTooLargeError();
    if (error instanceof BodyReadError && error.reason === 'already_read') throw new BodyAlreadyReadError(error.message);
    throw error;
  }
}

/** The form was consumed by a host's body parser before the dashboard got it: a setup mistake, answered 500. */
export class BodyAlreadyReadError extends Error {
  override readonly name = 'BodyAlreadyReadError';
}
