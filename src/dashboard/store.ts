import type { ActivityStore } from '../core/activity/recorder.js';
import type { Account } from '../core/auth/key-store.js';

/** A person who may sign in to the dashboard for one account (embedded sign-in only). */
export interface AccountHolder {
  /** Lower-cased. */
  email: string;
  accountId: string;
  /** `scrypt$N$r$p$salt$hash` (see passwords.ts); never the password. */
  passwordHash: string;
  updatedAt: string;
}

/** A signed-in browser. Stored under the SHA-256 of its id, so the store holds nothing usable. */
export interface SessionRecord {
  accountId: string;
  /** The holder's email, shown on the account page. */
  email: string;
  /** The anti-forgery token every state-changing request of this session must carry. */
  csrfToken: string;
  createdAt: string;
  expiresAt: string;
}

/**
 * What the dashboard keeps beside the keys: FileDashboardStore (holders in the key file,
 * sessions and activity in a file beside it) or RedisDashboardStore (in the key store's Redis).
 */
export interface DashboardStore extends ActivityStore {
  findAccount(accountId: string): Promise<Account | undefined>;
  findHolder(email: string): Promise<AccountHolder | undefined>;
  /** Creates or replaces the holder of `holder.accountId` (one per account; emails unique). */
  setHolder(holder: AccountHolder): Promise<void>;
  createSession(idHash: string, session: SessionRecord): Promise<void>;
  findSession(idHash: string): Promise<SessionRecord | undefined>;
  deleteSession(idHash: string): Promise<void>;
  /** Signs the account out everywhere except `keepIdHash` (after a password change). */
  deleteSessionsOf(accountId: string, keepIdHash?: string): Promise<void>;
  /**
   * Charged cutouts per day, when the store keeps the month's usage per day (FileDashboardStore
   * as the handler's `usageStore`; RedisDashboardStore reading what the handler's Redis usage
   * meter records): the usage page then charts cutouts and refusals apart. Undefined when the
   * handler keeps its usage elsewhere.
   */
  dailyUsage?(accountId: string, days: string[]): Promise<Array<{ images: number; megapixels: number }> | undefined>;
}

export class EmailTakenError extends Error {
  override readonly name = 'EmailTakenError';
}
