import { InvalidAllowListEntryError, validateAllowedIps } from '../core/auth/ip-allow-list.js';
import { isOrigin } from '../core/auth/origin-allow-list.js';
import { LIFETIMES } from './pages/keys.js';

/** Most IP ranges or origins one key may list. */
const MAX_ENTRIES = 20;

export interface KeyFormValues {
  label?: string;
  expiresAt: Date | null;
  allowedIps: string[];
  allowedOrigins: string[];
}

/** Entries split on white space and commas (so none has white space left), empty ones dropped. */
const lines = (text: string | null) =>
  (text ?? '')
    .split(/[\s,]+/)
    .filter(Boolean);

/** The create-key form, checked: the values for createKey, or the first problem in words. */
export function parseKeyForm(form: URLSearchParams, now = Date.now()): KeyFormValues | { error: string } {
  const label = (form.get('label') ?? '').trim();
  if (label.length > 100) return { error: 'The label is longer than 100 characters.' };
  if (/[\p{Cc}]/u.test(label)) return { error: 'The label has control characters.' };
  const lifetime = LIFETIMES.find(([value]) => value === (form.get('expires') ?? 'never'));
  if (!lifetime) return { error: 'Pick an expiry from the list.' };
  const allowedIps = lines(form.get('ips'));
  const allowedOrigins = lines(form.get('origins'));
  if (allowedIps.length > MAX_ENTRIES || allowedOrigins.length > MAX_ENTRIES) return { error: `List at most ${MAX_ENTRIES} addresses and ${MAX_ENTRIES} origins.` };
  try {
    validateAllowedIps(allowedIps);
  } catch (error) {
    if (error instanceof InvalidAllowListEntryError) return { error: error.message };
    throw error;
  }
  const badOrigin = allowedOrigins.find((o) => !isOrigin(o));
  if (badOrigin) return { error: `"${badOrigin}" is not an origin (such as https://shop.example, without a path).` };
  return {
    ...(label ? { label } : {}),
    expiresAt: lifetime[1] === null ? null : new Date(now + lifetime[1]),
    allowedIps,
    allowedOrigins,
  };
}
