import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingHeaders } from '../core/http-types.js';

/** Cookies of a request by name (the first of each name wins). */
export function readCookies(headers: IncomingHeaders): Map<string, string> {
  const cookies = new Map<string, string>();
  const header = headers.cookie;
  for (const part of (Array.isArray(header) ? header.join('; ') : (header ?? '')).split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    const name = part.slice(0, eq).trim();
    if (name && !cookies.has(name)) cookies.set(name, part.slice(eq + 1).trim());
  }
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
  const parts = [`${name}=${value}`, `Path=${options.path}`, 'HttpOnly', 'SameSite=Strict'];
  if (options.secure) parts.push('Secure');
  if (options.maxAge !== undefined) parts.push(`Max-Age=${options.maxAge}`);
  return parts.join('; ');
}

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
