import { dayOf } from '../../core/activity/recorder.js';
import type { LocalUsageStore, Usage } from '../../core/index.js';

/** Charged cutouts of one account on one UTC day. */
export interface DayUsage {
  images: number;
  megapixels: number;
}

/** The usage part of the dashboard file. */
export interface UsageSection {
  /** Charged cutouts per account and UTC day (`YYYY-MM-DD`): the month's total is their sum. */
  days: Record<string, Record<string, DayUsage>>;
  /** Quota credits used, per `accountId:YYYY-MM` (the enforcer's counter keys). */
  quota: Record<string, number>;
}

/** Reads and read-modify-writes the usage section of the file it lives in (under that file's lock). */
export interface UsageFile {
  read(): Promise<UsageSection | undefined>;
  update(change: (usage: UsageSection) => void): Promise<void>;
}

interface PendingDay {
  accountId: string;
  day: string;
  images: number;
  megapixels: number;
}

export const emptyUsage = (): UsageSection => ({ days: {}, quota: {} });

const round = (mp: number) => Math.round(mp * 1e4) / 1e4;

/** Most account-days and quota counters held between two writes: a bound on memory. */
const MAX_PENDING = 100_000;

/**
 * The month's quota and usage of an instance without Redis, kept in the dashboard's file so a
 * restart loses neither (the enforcer's default is memory). Usage is kept per day: the month's
 * total (`get`) is the sum of its days, and the dashboard's daily chart reads the same days
 * (`dailyUsage`), so the two cannot disagree.
 *
 * Like ActivityRecorder, changes are counted in memory and written as one batch of additions
 * (a timer, every `flushIntervalMs`, and `close()`), never one file write per request; reads
 * add what is pending to the file's content. Several processes may share the file: each adds
 * its own counts; the pages read the file afresh, the quota checks the content as of this
 * process's last write (so the processes together may pass a quota by what they charged since).
 */
export class FileUsageStore implements LocalUsageStore {
  private pendingDays = new Map<string, PendingDay>();
  private pendingQuota = new Map<string, number>();
  /** The batch being written: still counted by reads until the file's new content replaces the snapshot. */
  private writingDays = new Map<string, PendingDay>();
  private writingQuota = new Map<string, number>();
  private snapshot: UsageSection | undefined;
  private loading: Promise<UsageSection> | undefined;
  private flushing: Promise<void> | undefined;
  private readonly timer: NodeJS.Timeout;
  /**
   * Whether a handler keeps its usage here (it has metered or read usage through this store):
   * until then the per-day figures would be zeros that mean nothing, and dailyUsage says so.
   */
  serving = false;

  constructor(
    private readonly file: UsageFile,
    private readonly options: { flushIntervalMs?: number; onError?: (error: unknown) => void } = {},
  ) {
    this.timer = setInterval(() => void this.flush().catch(() => {}), options.flushIntervalMs ?? 2000);
    this.timer.unref();
  }

  /** Completed writes: a file read that overlapped one is not taken as the snapshot. */
  private writes = 0;

  /**
   * For the pages (the month's total, the quota used, the daily chart): the file as it is now,
   * so what other processes sharing it have written shows too. The quota's checks (`charge`)
   * use the snapshot: no file read on the request path.
   */
  private async current(): Promise<UsageSection> {
    // A read that overlaps one of this process's own writes could count that write's batch twice
    // or not at all (it moves from pending to the file while the read is under way), so such a
    // read waits for the write and reads again; only after a few overlapped tries does it settle
    // for the snapshot, which lacks what other processes wrote since.
    for (let attempt = 0; attempt < 3; attempt++) {
      await this.flushing?.catch(() => {});
      const writes = this.writes;
      const usage = (await this.file.read()) ?? emptyUsage();
      if (!this.flushing && this.writes === writes) return (this.snapshot = usage);
    }
    return this.stored();
  }

  private async stored(): Promise<UsageSection> {
    if (this.snapshot) return this.snapshot;
    // ??=: a write that finished while this first read was under way left a newer snapshot.
    this.loading ??= this.file.read().then((usage) => (this.snapshot ??= usage ?? emptyUsage()));
    return this.loading;
  }

  // UsageMeter ------------------------------------------------------------------------------

  async add(accountId: string, month: string, megapixels: number, images = 1): Promise<void> {
    this.serving = true;
    const today = dayOf(new Date());
    // Recorded the moment it is metered: the day is today's, unless the month turned since the
    // cutout was charged (it counts in that month): then the month's last day.
    const day = today.startsWith(month) ? today : lastDayOf(month);
    const id = `${accountId}\n${day}`;
    const entry = this.pendingDays.get(id);
    if (entry) {
      entry.images += images;
      entry.megapixels = round(entry.megapixels + megapixels);
    } else if (this.pendingDays.size < MAX_PENDING) {
      this.pendingDays.set(id, { accountId, day, images, megapixels: round(megapixels) });
    } else {
      await this.flush();
      return this.add(accountId, month, megapixels, images);
    }
  }

  async get(accountId: string, month: string): Promise<Usage> {
    this.serving = true;
    const days = (await this.current()).days[accountId] ?? {};
    const usage: Usage = { month, images: 0, megapixels: 0 };
    for (const [day, counts] of Object.entries(days)) {
      if (!day.startsWith(month)) continue;
      usage.images += counts.images;
      usage.megapixels += counts.megapixels;
    }
    for (const entry of [...this.writingDays.values(), ...this.pendingDays.values()]) {
      if (entry.accountId !== accountId || !entry.day.startsWith(month)) continue;
      usage.images += entry.images;
      usage.megapixels += entry.megapixels;
    }
    usage.megapixels = round(usage.megapixels);
    return usage;
  }

  /** Charged cutouts of one account per day, for the given days (the chart's bars); undefined unless `serving`. */
  async dailyUsage(accountId: string, days: string[]): Promise<DayUsage[] | undefined> {
    if (!this.serving) return undefined;
    const stored = (await this.current()).days[accountId] ?? {};
    return days.map((day) => {
      const parts = [stored[day], this.writingDays.get(`${accountId}\n${day}`), this.pendingDays.get(`${accountId}\n${day}`)];
      return { images: parts.reduce((n, p) => n + (p?.images ?? 0), 0), megapixels: round(parts.reduce((n, p) => n + (p?.megapixels ?? 0), 0)) };
    });
  }

  // QuotaStore (one process's view: a call here is never lost or repeated, so ops need no record) --

  /** For the pages (the quota meter): from the file as it is now, like `get`. */
  async used(key: string): Promise<number> {
    await this.current();
    return this.usedNow(key);
  }

  // Each checks and changes with no await between (after the file's first read), so concurrent
  // charges cannot both pass one check.
  async charge(key: string, cost: number, limit: number): Promise<boolean> {
    await this.stored();
    if (this.usedNow(key) + cost > limit) return false;
    this.change(key, cost);
    return true;
  }

  async refund(key: string, cost: number): Promise<void> {
    await this.adjust(key, -cost);
  }

  async adjust(key: string, delta: number): Promise<void> {
    await this.stored();
    this.change(key, Math.max(-this.usedNow(key), delta)); // never below 0
  }

  private usedNow(key: string): number {
    return (this.snapshot?.quota[key] ?? 0) + (this.writingQuota.get(key) ?? 0) + (this.pendingQuota.get(key) ?? 0);
  }

  private change(key: string, delta: number): void {
    this.pendingQuota.set(key, (this.pendingQuota.get(key) ?? 0) + delta);
  }

  // Writing ---------------------------------------------------------------------------------

  /** Adds what is pending to the file; a failed write keeps it for the next one. */
  flush(): Promise<void> {
    this.flushing ??= this.write().finally(() => (this.flushing = undefined));
    return this.flushing;
  }

  private async write(): Promise<void> {
    if (this.pendingDays.size === 0 && this.pendingQuota.size === 0) return;
    const days = (this.writingDays = this.pendingDays);
    const quota = (this.writingQuota = this.pendingQuota);
    this.pendingDays = new Map();
    this.pendingQuota = new Map();
    try {
      let written: UsageSection | undefined;
      await this.file.update((usage) => {
        for (const { accountId, day, images, megapixels } of days.values()) {
          const counts = ((usage.days[accountId] ??= {})[day] ??= { images: 0, megapixels: 0 });
          counts.images += images;
          counts.megapixels = round(counts.megapixels + megapixels);
        }
        for (const [key, delta] of quota) usage.quota[key] = Math.max(0, (usage.quota[key] ?? 0) + delta);
        prune(usage);
        written = structuredClone(usage);
      });
      this.snapshot = written;
      this.writes++;
      this.writingDays = new Map();
      this.writingQuota = new Map();
    } catch (error) {
      this.writingDays = new Map();
      this.writingQuota = new Map();
      for (const [id, entry] of days) {
        const now = this.pendingDays.get(id);
        if (now) {
          now.images += entry.images;
          now.megapixels = round(now.megapixels + entry.megapixels);
        } else this.pendingDays.set(id, entry);
      }
      for (const [key, delta] of quota) this.pendingQuota.set(key, (this.pendingQuota.get(key) ?? 0) + delta);
      (this.options.onError ?? ((e) => console.error('bgcut: usage not saved:', e instanceof Error ? e.message : e)))(error);
      throw error;
    }
  }

  /** Stops the timer and writes what is pending. */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}

/** `YYYY-MM-DD` of the last day of `month` (`YYYY-MM`). */
function lastDayOf(month: string): string {
  const [year, monthNumber] = month.split('-').map(Number) as [number, number];
  return dayOf(new Date(Date.UTC(year, monthNumber, 0)));
}

/**
 * Keeps this month, the last, and every month the chart's 30 days reach (on 1 March of a
 * non-leap year they start on 31 January): 31 days back always lies in the last month or
 * before it, so its month is the oldest kept.
 */
function prune(usage: UsageSection): void {
  const oldest = new Date(Date.now() - 31 * 86_400_000).toISOString().slice(0, 7);
  for (const [accountId, days] of Object.entries(usage.days)) {
    for (const day of Object.keys(days)) if (day.slice(0, 7) < oldest) delete days[day];
    if (Object.keys(days).length === 0) delete usage.days[accountId];
  }
  for (const key of Object.keys(usage.quota)) if (key.slice(-7) < oldest) delete usage.quota[key];
}
