import type { ActivityBatch } from '../../core/activity/recorder.js';
import type { FileKeyStore, KeyFile } from '../../core/auth/file-key-store.js';
import type { Account } from '../../core/auth/key-store.js';
import { EmailTakenError, type AccountHolder, type DashboardStore, type SessionRecord } from '../store.js';
import { emptyUsage, FileUsageStore, type DayUsage, type UsageSection } from './file-usage.js';
import { JsonFile } from './json-file.js';

/** What changes often (every sign-in, every activity flush): in the dashboard's own file. */
interface DashboardFile {
  version: 1;
  sessions: Record<string, SessionRecord>;
  activity: { daily: Record<string, Record<string, number>>; lastUsed: Record<string, string> };
  /** The month's quota and usage when the handler keeps them here (`usageStore: store.usage`). */
  usage?: UsageSection;
}

/** The key file's part: the account holders (they change when a password does), and what versions before 0.2 kept there. */
interface KeyFileWithHolders extends KeyFile {
  holders?: AccountHolder[];
  sessions?: DashboardFile['sessions'];
  activity?: Partial<DashboardFile['activity']>;
}

export interface FileDashboardStoreOptions {
  /** The file for sessions and activity. Default: beside the key file, `keys.json` -> `keys.dashboard.json`. */
  file?: string;
}

/** Days of per-day counts kept in the file. */
const KEEP_DAYS = 32;

const emptyFile = (): DashboardFile => ({ version: 1, sessions: {}, activity: { daily: {}, lastUsed: {} } });

/**
 * The embedded store. Account holders live in the key file (written under its lock, as rarely
 * as passwords change); sessions and activity in a file of their own, so that sign-ins and the
 * ActivityRecorder's flush (every 10 s while requests come in) never rewrite the key file, which
 * every instance re-reads when it changes. Activity arrives in batches, so the dashboard file is
 * written at most once per flush interval, never once per request.
 */
export class FileDashboardStore implements DashboardStore {
  private readonly own: JsonFile<DashboardFile>;
  /**
   * The month's quota and usage, kept in this store's file: pass it to the handler as
   * `usageStore` (without Redis), and they survive a restart; the usage page's month total and
   * its daily chart then read the same per-day records. Close it (or the store) on shutdown.
   */
  readonly usage: FileUsageStore;

  constructor(
    private readonly keys: FileKeyStore,
    options: FileDashboardStoreOptions = {},
  ) {
    this.own = new JsonFile(options.file ?? keys.file.replace(/(\.json)?$/, '.dashboard.json'), emptyFile);
    this.usage = new FileUsageStore({
      read: async () => (await this.read()).usage,
      update: (change) => this.update((data) => change((data.usage ??= emptyUsage()))),
    });
  }

  /** Charged cutouts per day, from the records the month's total is summed from. */
  dailyUsage(accountId: string, days: string[]): Promise<DayUsage[] | undefined> {
    return this.usage.dailyUsage(accountId, days);
  }

  /** Writes the usage still pending. */
  async close(): Promise<void> {
    await this.usage.close();
  }

  /** Where sessions and activity are kept. */
  get file(): string {
    return this.own.file;
  }

  private async readKeys(): Promise<KeyFileWithHolders> {
    return (await this.keys.readData()) as KeyFileWithHolders;
  }

  /** Sessions and activity: the dashboard file, or before its first write what an older version left in the key file. */
  private async read(): Promise<DashboardFile> {
    return (await this.own.read()) ?? (await this.legacy()) ?? emptyFile();
  }

  private async legacy(): Promise<DashboardFile | undefined> {
    const data = await this.readKeys();
    if (!data.sessions && !data.activity) return undefined;
    return { version: 1, sessions: data.sessions ?? {}, activity: { daily: data.activity?.daily ?? {}, lastUsed: data.activity?.lastUsed ?? {} } };
  }

  private async update(change: (data: DashboardFile) => void): Promise<void> {
    let moved = false;
    await this.own.update(change, async () => {
      const old = await this.legacy();
      moved = old !== undefined;
      return old;
    });
    // The first write carried over what an older version kept in the key file: drop it there, once.
    if (moved) {
      await this.keys.update((data) => {
        delete (data as KeyFileWithHolders).sessions;
        delete (data as KeyFileWithHolders).activity;
      });
    }
  }

  async findAccount(accountId: string): Promise<Account | undefined> {
    return (await this.readKeys()).accounts.find((a) => a.id === accountId);
  }

  async findHolder(email: string): Promise<AccountHolder | undefined> {
    return (await this.readKeys()).holders?.find((h) => h.email === email);
  }

  async setHolder(holder: AccountHolder): Promise<void> {
    await this.keys.update((file) => {
      const data = file as KeyFileWithHolders;
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
      const sessions = data.sessions;
      // Expired sessions are dropped whenever a new one is written, so the file does not grow.
      for (const [id, s] of Object.entries(sessions)) if (s.expiresAt <= now) delete sessions[id];
      sessions[idHash] = session;
    });
  }

  async findSession(idHash: string): Promise<SessionRecord | undefined> {
    const sessions = (await this.read()).sessions;
    return Object.hasOwn(sessions, idHash) ? sessions[idHash] : undefined;
  }

  async deleteSession(idHash: string): Promise<void> {
    await this.update((data) => {
      delete data.sessions[idHash];
    });
  }

  async deleteSessionsOf(accountId: string, keepIdHash?: string): Promise<void> {
    await this.update((data) => {
      for (const [id, s] of Object.entries(data.sessions)) {
        if (s.accountId === accountId && id !== keepIdHash) delete data.sessions[id];
      }
    });
  }

  async addActivity(batch: ActivityBatch): Promise<void> {
    await this.update((data) => {
      const { daily, lastUsed } = data.activity;
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
    const counts = (await this.read()).activity.daily[accountId] ?? {};
    return days.map((day) => counts[day] ?? 0);
  }

  async lastUsed(keyIds: string[]): Promise<Record<string, string>> {
    const all = (await this.read()).activity.lastUsed;
    const found: Record<string, string> = {};
    for (const id of keyIds) if (all[id]) found[id] = all[id];
    return found;
  }
}
