import { expect } from 'vitest';
import { hashApiKey } from '../../src/core/auth/api-key.js';
import type { KeyAdmin, KeyStore } from '../../src/core/auth/key-store.js';

/**
 * A key revoked through `writer` is still served as active by `reader` until `boundaryMs` after
 * the first lookup, and seen revoked exactly at `boundaryMs` (the reader's injected clock is moved
 * by hand, so the millisecond is checked, not a sleep).
 */
export async function expectRevocationSeenAt(reader: KeyStore, writer: KeyAdmin, clock: { now: number }, boundaryMs: number, accountId: string) {
  const { key, record } = await writer.createKey({ accountId, plan: 'p' });
  const start = clock.now;
  expect((await reader.findByHash(hashApiKey(key)))?.key.revokedAt).toBeNull();
  await writer.revokeKey(record.id);
  clock.now = start + boundaryMs - 1;
  expect((await reader.findByHash(hashApiKey(key)))?.key.revokedAt).toBeNull();
  clock.now = start + boundaryMs;
  expect((await reader.findByHash(hashApiKey(key)))?.key.revokedAt).toBeTypeOf('string');
}
