/**
 * Per-key "last used" times and per-account requests per day, for the dashboard. Counting is
 * cheap: each request only touches two maps in memory; a timer writes the batch to the store
 * (one Redis round trip, or one file write) every `flushIntervalMs`, never one write per request.
 */
export interface ActivityBatch {
  /** Requests per account and UTC day (`YYYY-MM-DD`). */
  daily: Array<{ accountId: string; day: string; count: number }>;
  /** Latest use per key id, ISO time. */
  lastUsed: Array<{ keyId: string; at: string }>;
}

/** Where batches go and are read back: FileDashboardStore or RedisDashboardStore. */
export interface ActivityStore {
  addActivity(batch: ActivityBatch): Promise<void>;
  /** Requests per day of one account, for the given days. */
  dailyCounts(accountId: string, days: string[]): Promise<number[]>;
  /** Latest use of each key that was ever used. */
  lastUsed(keyIds: string[]): Promise<Record<string, string>>;
}

export interface ActivityRecorderOptions {
  store: ActivityStore;
  /** How often the batch is written. Default 10 000 ms. */
  flushIntervalMs?: number;
  /** Told when a write fails (the batch is kept and retried). Default: one line to stderr. */
  onError?: (error: unknown) => void;
}

export const dayOf = (date: Date): string => date.toISOString().slice(0, 10);

/** The last `count` UTC days, oldest first, ending today. */
export function lastDays(count: number, now = new Date()): string[] {
  const days: string[] = [];
  for (let i = count - 1; i >= 0; i--) days.push(dayOf(new Date(now.getTime() - i * 86_400_000)));
  return days;
}

/** Most distinct keys and account-days held between two writes: a bound on memory. */
const MAX_PENDING = 100_000;

export class ActivityRecorder {
  private readonly store: ActivityStore;
  private readonly onError: (error: unknown) => void;
  private daily = new Map<string, { accountId: string; day: string; count: number }>();
  private used = new Map<string, string>();
  private readonly timer: NodeJS.Timeout;
  private flushing: Promise<void> | undefined;
  /** Writes that ended (stored or failed): a store read that overlapped one is not trusted. */
  private writesEnded = 0;

  constructor(options: ActivityRecorderOptions) {
    this.store = options.store;
    this.onError = options.onError ?? ((error) => console.error('bgcut: activity not saved:', error instanceof Error ? error.message : error));
    this.timer = setInterval(() => void this.flush(), options.flushIntervalMs ?? 10_000);
    this.timer.unref();
  }

  /** One request of `accountId`; `keyId` absent for requests made from the dashboard. */
  record(accountId: string, keyId: string | undefined, now = new Date()): void {
    const day = dayOf(now);
    const id = `${accountId}\n${day}`;
    const entry = this.daily.get(id);
    if (entry) entry.count++;
    else if (this.daily.size < MAX_PENDING) this.daily.set(id, { accountId, day, count: 1 });
    if (keyId && (this.used.has(keyId) || this.used.size < MAX_PENDING)) this.used.set(keyId, now.toISOString());
  }

  /** Writes what is pending; a failed write is merged back for the next one. */
  flush(): Promise<void> {
    this.flushing ??= this.write().finally(() => {
      this.writesEnded++;
      this.flushing = undefined;
    });
    return this.flushing;
  }

  private async write(): Promise<void> {
    if (this.daily.size === 0 && this.used.size === 0) return;
    const daily = this.daily;
    const used = this.used;
    this.daily = new Map();
    this.used = new Map();
    try {
      await this.store.addActivity({ daily: [...daily.values()], lastUsed: [...used].map(([keyId, at]) => ({ keyId, at })) });
    } catch (error) {
      // A store that wrote part of the batch says which part it did not (RedisDashboardStore on a
      // Cluster writes each account on its own): only that part is kept, so nothing counts twice.
      const unwritten = (error as { unwritten?: ActivityBatch }).unwritten;
      if (unwritten) {
        daily.clear();
        used.clear();
        for (const entry of unwritten.daily) daily.set(`${entry.accountId}\n${entry.day}`, entry);
        for (const { keyId, at } of unwritten.lastUsed) used.set(keyId, at);
      }
      for (const [id, entry] of daily) {
        const now = this.daily.get(id);
        if (now) now.count += entry.count;
        else this.daily.set(id, entry);
      }
      for (const [keyId, at] of used) if (!this.used.has(keyId)) this.used.set(keyId, at);
      this.onError(error);
    }
  }

  /**
   * A store read that no write of this instance overlapped. During a write its batch is neither
   * pending nor (until the write lands) stored, so an overlapping read could miss it, or count it
   * twice if it were added back: such a read waits for the write and reads again. Only after a
   * few overlapped tries (a flush interval far shorter than a read) does it settle for the last.
   */
  private async readStore<T>(read: () => Promise<T>): Promise<T> {
    let stored!: T;
    for (let attempt = 0; attempt < 3; attempt++) {
      await this.flushing;
      const ended = this.writesEnded;
      stored = await read();
      if (!this.flushing && this.writesEnded === ended) break;
    }
    return stored;
  }

  /** Stored counts plus this instance's pending ones, so a page shows a request at once. */
  async dailyCounts(accountId: string, days: string[]): Promise<number[]> {
    const stored = await this.readStore(() => this.store.dailyCounts(accountId, days));
    return days.map((day, i) => (stored[i] ?? 0) + (this.daily.get(`${accountId}\n${day}`)?.count ?? 0));
  }

  async lastUsed(keyIds: string[]): Promise<Record<string, string>> {
    const stored = await this.readStore(() => this.store.lastUsed(keyIds));
    for (const keyId of keyIds) {
      const pending = this.used.get(keyId);
      if (pending && !(stored[keyId] && stored[keyId]! > pending)) stored[keyId] = pending;
    }
    return stored;
  }

  /** Stops the timer and writes what is pending. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}
