import { generateApiKey, hashApiKey, keyIdOf } from './api-key.js';
import { validateAllowedIps } from './ip-allow-list.js';
import { validateAllowedOrigins } from './origin-allow-list.js';
import type { CreateKeyOptions, KeyRecord } from './key-store.js';

/**
 * A new key and the record that is stored for it (the record holds only the hash). Throws
 * InvalidAllowListEntryError or InvalidAllowedOriginError.
 */
export function newKey(options: Omit<CreateKeyOptions, 'plan'>, now = new Date()): { key: string; record: KeyRecord } {
  // Checked before anything is stored: a bad entry would otherwise fail every request with the key.
  validateAllowedIps(options.allowedIps);
  validateAllowedOrigins(options.allowedOrigins);
  const key = generateApiKey();
  const hash = hashApiKey(key);
  const record: KeyRecord = {
    id: keyIdOf(hash),
    hash,
    accountId: options.accountId,
    ...(options.label ? { label: options.label.slice(0, 100) } : {}),
    createdAt: now.toISOString(),
    expiresAt: options.expiresAt ? options.expiresAt.toISOString() : null,
    revokedAt: null,
    ...(options.allowedIps?.length ? { allowedIps: options.allowedIps } : {}),
    ...(options.allowedOrigins?.length ? { allowedOrigins: options.allowedOrigins } : {}),
  };
  return { key, record };
}

/** The key's expiry brought forward to `until`, unless it already ends sooner. */
export function expireBy(record: KeyRecord, until: Date): KeyRecord {
  const current = record.expiresAt ? Date.parse(record.expiresAt) : Infinity;
  return { ...record, expiresAt: new Date(Math.min(current, until.getTime())).toISOString() };
}

export class NotFoundError extends Error {
  override readonly name = 'NotFoundError';
}

/**
 * The key was rotated already: it is being replaced by `successorId` and works only until its
 * overlap ends. Rotating it again would make a second successor that inherits that short
 * deadline; rotate the successor instead.
 */
export class KeyAlreadyReplacedError extends Error {
  override readonly name = 'KeyAlreadyReplacedError';
  constructor(
    readonly keyId: string,
    readonly successorId: string,
  ) {
    super(`key ${keyId} is already being replaced by ${successorId}: rotate ${successorId} instead`);
  }
}

/** The account already has as many active keys as it may (CreateKeyOptions.maxActiveKeys). */
export class TooManyKeysError extends Error {
  override readonly name = 'TooManyKeysError';
  constructor(readonly maxActiveKeys: number) {
    super(`An account may have at most ${maxActiveKeys} active keys: revoke one first.`);
  }
}
