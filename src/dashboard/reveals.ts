import { createHash } from 'node:crypto';
import type { KeyRecord } from '../core/auth/key-store.js';
import type { Visitor } from './sessions.js';

/** A key just made (or rotated), waiting to be shown to the browser that made it. */
export interface Reveal {
  key: string;
  record: KeyRecord;
  /** The key it replaces, after a rotation. */
  rotated?: KeyRecord;
}

/** How long a new key waits to be shown: the redirect after the post comes at once. */
const HOLD_MS = 5 * 60_000;
/** Most keys waiting at once (one per browser); the oldest go first past it. */
const MAX_HELD = 10_000;

/**
 * Post/Redirect/Get for new keys: the POST that makes a key holds it here, in this process's
 * memory only (never a file, a log or Redis: only hashes of keys are stored), under the
 * browser's session, and answers 303 to the page that shows it; that GET takes it out, so it is
 * shown once, and reloading that page (or posting nothing again) makes no second key. With
 * several instances the redirect must reach the same one (sticky sessions); elsewhere the page
 * says the key can no longer be shown and how to get another.
 */
export class Reveals {
  private readonly held = new Map<string, Reveal & { until: number }>();

  hold(visitor: Visitor, accountId: string, reveal: Reveal): void {
    const now = Date.now();
    for (const [id, entry] of this.held) if (entry.until <= now) this.held.delete(id);
    const id = this.id(visitor, accountId);
    this.held.delete(id); // re-inserted last: the Map's order is the eviction order
    while (this.held.size >= MAX_HELD) this.held.delete(this.held.keys().next().value!);
    this.held.set(id, { ...reveal, until: now + HOLD_MS });
  }

  /** The key waiting for this browser, removed as it is returned. */
  take(visitor: Visitor, accountId: string): Reveal | undefined {
    const id = this.id(visitor, accountId);
    const entry = this.held.get(id);
    this.held.delete(id);
    if (!entry || entry.until <= Date.now()) return undefined;
    const { until: _until, ...reveal } = entry;
    return reveal;
  }

  /** The signed-in session (embedded sign-in) or this browser's anti-forgery token (the host's own sign-in). */
  private id(visitor: Visitor, accountId: string): string {
    const browser = visitor.sessionIdHash ?? createHash('sha256').update(visitor.csrfToken).digest('hex');
    return `${accountId}\n${browser}`;
  }
}
