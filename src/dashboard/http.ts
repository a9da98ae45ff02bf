import type { Readable } from 'node:stream';
import type { CoreRequest, CoreResponse } from '../core/http-types.js';
import type { SafeHtml } from './html.js';
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

/** Reads an `application/x-www-form-urlencoded` body of at most MAX_FORM_BYTES. */
export async function readForm(request: CoreRequest): Promise<URLSearchParams> {
  const type = String(request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/x-www-form-urlencoded') {
    discardBody(request.body);
    return new URLSearchParams();
  }
  const text = await readText(request.body, MAX_FORM_BYTES);
  return new URLSearchParams(text);
}

function readText(body: Readable, max: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    body.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > max) {
        body.destroy();
        reject(new FormTooLargeError());
      } else chunks.push(chunk);
    });
    body.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    body.on('error', reject);
  });
}
