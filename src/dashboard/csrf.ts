import { timingSafeEqual } from 'node:crypto';
import type { CoreRequest } from '../core/http-types.js';

/** This server's origin as the browser sees it: scheme (after trusted proxies) and Host. */
export function ownOrigin(request: CoreRequest): string | undefined {
  const host = request.headers.host;
  if (typeof host !== 'string' || !/^[A-Za-z0-9.:[\]-]+$/.test(host)) return undefined;
  return `${request.protocol === 'https' ? 'https' : 'http'}://${host.toLowerCase()}`;
}

/**
 * First defence against cross-site requests: a browser names the page's origin in `Origin` on
 * every POST (and says `Sec-Fetch-Site`); it must be this server or a trusted origin. A request
 * with neither header (not from a browser) is left to the token check, the second defence.
 */
export function checkOrigin(request: CoreRequest, trusted: Set<string>): boolean {
  const origin = request.headers.origin;
  if (typeof origin === 'string') return origin !== 'null' && (origin === ownOrigin(request) || trusted.has(origin));
  if (origin !== undefined) return false;
  const site = request.headers['sec-fetch-site'];
  if (site === undefined) return true;
  return site === 'same-origin' || site === 'none';
}

/** Constant-time comparison of a submitted anti-forgery token with the expected one. */
export function tokensEqual(submitted: string | null | undefined, expected: string): boolean {
  if (!submitted || !expected) return false;
  const a = Buffer.from(submitted);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}
