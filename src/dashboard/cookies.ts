import { createHmac, timingSafeEqual } from 'node:crypto';
import { parseCookie, stringifySetCookie } from 'cookie';
import type { IncomingHeaders } from '../core/http-types.js';

/** Cookies of a request by name (jshttp's `cookie`: the first of each name wins, quoted and %-encoded values are decoded). */
export function readCookies(headers: IncomingHeaders): Map<string, string> {
  const header = headers.cookie;
  const parsed = parseCookie(Array.isArray(header) ? header.join('; ') : (header ?? ''));
  const cookies = new Map<string, string>();
  for (const [name, value] of Object.entries(parsed)) if (value !== undefined) cookies.set(name, value);
  return cookies;
}

export interface CookieOptions {
  path: string;
  secure: boolean;
  /** Seconds; 0 deletes the cookie. Absent for a browser-session cookie. */
  maxAge?: number;
}

/** Always HttpOnly and SameSite=Strict: no script reads it, no other site's request carries it. */
export function serializeCookie(name: string, value: string, options: CookieOptions): string {
  return stringifySetCookie(name, value, {
    path: options.path,
    httpOnly: true,
    sameSite: 'strict',
    secure: options.secure,
    ...(options.maxAge !== undefined ? { maxAge: options.maxAge } : {}),
  });
}

/*
 * Signing stays here rather than in `cookie-signature`: that library signs with base64 (`+`, `/`),
 * which the cookie would then carry %-encoded; base64url needs no encoding. It is the same
 * HMAC-SHA256 and the same constant-time comparison.
 */

/** `value.signature`: an HMAC-SHA256 of the value under the dashboard's secret. */
export function sign(value: string, secret: Buffer): string {
  return `${value}.${createHmac('sha256', secret).update(value).digest('base64url')}`;
}

/** The value of a signed cookie, or undefined when the signature does not match. */
export function unsign(signed: string | undefined, secret: Buffer): string | undefined {
  if (!signed) return undefined;
  const dot = signed.lastIndexOf('.');
  if (dot <= 0) return undefined;
  const value = signed.slice(0, dot);
  const expected = Buffer.from(sign(value, secret).slice(dot + 1));
  const actual = Buffer.from(signed.slice(dot + 1));
  return expected.length === actual.length && timingSafeEqual(expected, actual) ? value : undefined;
}
