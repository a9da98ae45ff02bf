import type { ActivityBatch } from '../../core/activity/recorder.js';
import type { FileKeyStore, KeyFile } from '../../core/auth/file-key-store.js';
import type { Account } from '../../core/auth/key-store.js';
import { EmailTakenError, type AccountHolder, type DashboardStore, type SessionRecord } from '../store.js';

/** The dashboard's part of the key file, beside `accounts` and `keys`. */
interface DashboardData {
  holders?: AccountHolder[];
  sessions?: Record<string, SessionRecord>;
  activity?: { daily?: Record<string, Record<string, number>>; lastUsed?: Record<string, string> };
}

/** Days of per-day counts kept in the file. */
const KEEP_DAYS = 32;

/**
 * The embedded store: account holders, sessions and activity live in the key file itself,
 * written under its lock. Activity arrives in batches (ActivityRecorder), so the file is written
 * at most once per flush interval, never once per request.
 */
export class FileDashboardStore implements DashboardStore {
  constructor(private readonly keys: FileKeyStore) {}

  private async read(): Promise<KeyFile & DashboardData> {
    return (await this.keys.readData()) as KeyFile & DashboardData;
  }

  private update(change: (data: KeyFile & DashboardData) => void): Promise<void> {
    return this.keys.update((data) => change(data as KeyFile & DashboardData));
  }

  async findAccount(accountId: string): Promise<Account | undefined> {
    return (await this.read()).accounts.find((a) => a.id === accountId);
  }

  async findHolder(email: string): Promise<AccountHolder | undefined> {
    return (await this.read()).holders?.find((h) => h.email === email);
  }

  async setHolder(holder: AccountHolder): Promise<void> {
    await this.update((data) => {
      const holders = (data.holders ??= []);
      if (holders.some((h) => h.email === holder.email && h.accountId !== holder.accountId)) {
        throw new EmailTakenError(`${holder.email} already signs in to another account`);
      }
      data.holders = [...holders.filter((h) => h.accountId !== holder.accountId), holder];
    });
  }

  async createSession(idHash: string, session: SessionRecord): Promise<void> {
    await this.update((data) => {
      const now = new Date().toISOString();
      const sessions = (data.sessions ??= {});
      // Expired sessions are dropped whenever a new one is written, so the file does not grow.
      for (const [id, s] of Object.entries(sessions)) if (s.expiresAt <= now) delete sessions[id];
      sessions[idHash] = session;
    });
  }

  async findSession(idHash: string): Promise<SessionRecord | undefined> {
    const sessions = (await this.read()).sessions;
    return sessions && Object.hasOwn(sessions, idHash) ? sessions[idHash] : undefined;
  }

  async deleteSession(idHash: string): Promise<void> {
    await this.update((data) => {
      if (data.sessions) delete data.sessions[idHash];
    });
  }

  async deleteSessionsOf(accountId: string, keepIdHash?: string): Promise<void> {
    await this.update((data) => {
      for (const [id, s] of Object.entries(data.sessions ?? {})) {
        if (s.accountId === accountId && id !== keepIdHash) delete data.sessions![id];
      }
    });
  }

  async addActivity(batch: ActivityBatch): Promise<void> {
    await this.update((data) => {
      const activity = (data.activity ??= {});
      const daily = (activity.daily ??= {});
      const lastUsed = (activity.lastUsed ??= {});
      for (const { accountId, day, count } of batch.daily) {
        const days = (daily[accountId] ??= {});
        days[day] = (days[day] ?? 0) + count;
      }
      for (const { keyId, at } of batch.lastUsed) {
        if (!lastUsed[keyId] || lastUsed[keyId]! < at) lastUsed[keyId] = at;
      }
      const oldest = new Date(Date.now() - KEEP_DAYS * 86_400_000).toISOString().slice(0, 10);
      for (const days of Object.values(daily)) for (const day of Object.keys(days)) if (day < oldest) delete days[day];
    });
  }

  async dailyCounts(accountId: string, days: string[]): Promise<number[]> {
    const counts = (await this.read()).activity?.daily?.[accountId] ?? {};
    return days.map((day) => counts[day] ?? 0);
  }

  async lastUsed(keyIds: string[]): Promise<Record<string, string>> {
    const all = (await this.read()).activity?.lastUsed ?? {};
    const found: Record<string, string> = {};
    for (const id of keyIds) if (all[id]) found[id] = all[id];
    return found;
  }
}
