import { mkdtemp, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { dayOf, FileKeyStore, lastDays } from '../src/core/index.js';
import { monthOf } from '../src/core/limits/usage-meter.js';
import { FileDashboardStore } from '../src/dashboard/index.js';
import { clearOfUtcMidnight } from './helpers/utc-day.js';
import { emptyUsage, FileUsageStore, type UsageSection } from '../src/dashboard/stores/file-usage.js';

async function freshStore(dir?: string) {
  const folder = dir ?? (await mkdtemp(path.join(os.tmpdir(), 'bgcut-usage-')));
  const keys = new FileKeyStore({ file: path.join(folder, 'keys.json'), reloadIntervalMs: 0 });
  return { folder, store: new FileDashboardStore(keys) };
}

describe('FileDashboardStore.usage: the month\'s quota and usage without Redis', () => {
  // The store dates its records by the real clock: these tests (well under 10 s) run on one UTC day.
  let month: string;
  let today: string;
  beforeAll(async () => {
    await clearOfUtcMidnight(10_000);
    const now = new Date();
    [month, today] = [monthOf(now), dayOf(now)];
  });

  it('counts the month as the sum of its days, and a new instance on the same file (a restart) reads the same', async () => {
    const { folder, store } = await freshStore();
    await store.usage.add('acct', month, 1.5);
    await store.usage.add('acct', month, 0.25);
    await store.usage.add('other', month, 3);
    expect(await store.usage.charge('acct:' + month, 2, 10)).toBe(true);
    // Read back before any write: what is pending counts.
    expect(await store.usage.get('acct', month)).toEqual({ month, images: 2, megapixels: 1.75 });
    expect(await store.dailyUsage('acct', [today])).toEqual([{ images: 2, megapixels: 1.75 }]);
    await store.close();
    expect(JSON.parse(await readFile(store.file, 'utf8')).usage.days.acct[today]).toEqual({ images: 2, megapixels: 1.75 });

    const { store: restarted } = await freshStore(folder);
    expect(await restarted.usage.get('acct', month)).toEqual({ month, images: 2, megapixels: 1.75 });
    expect(await restarted.usage.used('acct:' + month)).toBe(2);
    expect(await restarted.dailyUsage('acct', [today])).toEqual([{ images: 2, megapixels: 1.75 }]);
    await restarted.close();
  });

  it('charges the quota in one step: of 20 parallel charges of 1 against a limit of 10, exactly 10 pass; a refund never goes below 0', async () => {
    const { store } = await freshStore();
    const key = `acct:${month}`;
    const answers = await Promise.all(Array.from({ length: 20 }, () => store.usage.charge(key, 1, 10)));
    expect(answers.filter(Boolean)).toHaveLength(10);
    await store.usage.flush();
    // Charges during and after a write are counted with it.
    const during = store.usage.charge(key, 1, 11);
    const flushing = store.usage.flush();
    expect(await during).toBe(true);
    await flushing;
    expect(await store.usage.used(key)).toBe(11);
    await store.usage.refund(key, 50);
    expect(await store.usage.used(key)).toBe(0);
    await store.close();
  });

  it('says it has no per-day usage until a handler keeps its usage there', async () => {
    const { store } = await freshStore();
    expect(await store.dailyUsage('acct', [today])).toBeUndefined();
    await store.usage.get('acct', month);
    expect(await store.dailyUsage('acct', [today])).toEqual([{ images: 0, megapixels: 0 }]);
    await store.close();
  });

  it('a page read during one of its own writes still shows what another process wrote meanwhile, and counts its own batch once', async () => {
    // The shared file, in memory; this process's write is held at a gate so the read overlaps it.
    let content: UsageSection = emptyUsage();
    let openGate!: () => void;
    const gate = new Promise<void>((resolve) => (openGate = resolve));
    const store = new FileUsageStore({
      read: async () => structuredClone(content),
      update: async (change) => {
        await gate;
        const next = structuredClone(content);
        change(next);
        content = next;
      },
    }, { flushIntervalMs: 3_600_000 });
    expect(await store.get('acct', month)).toEqual({ month, images: 0, megapixels: 0 }); // the snapshot is loaded
    await store.add('acct', month, 2);
    const writing = store.flush();
    // Another process adds 5 images today while this one's write waits.
    content = { ...content, days: { acct: { [today]: { images: 5, megapixels: 1 } } } };
    const reading = store.get('acct', month);
    openGate();
    await writing;
    expect(await reading).toEqual({ month, images: 6, megapixels: 3 });
    expect(content.days.acct![today]).toEqual({ images: 6, megapixels: 3 });
    await store.close();
  });

  describe('on a faked clock (Date only: timers stay real)', () => {
    /** A store over a usage section in memory (`file.content`: the file as every process sees it). */
    function inMemoryStore(initial: UsageSection = emptyUsage()) {
      const file = { content: initial };
      const store = new FileUsageStore({
        read: async () => structuredClone(file.content),
        update: async (change) => {
          const next = structuredClone(file.content);
          change(next);
          file.content = next;
        },
      }, { flushIntervalMs: 3_600_000 });
      return { store, file };
    }
    const clockAt = (iso: string) => {
      vi.useFakeTimers({ toFake: ['Date'] });
      vi.setSystemTime(new Date(iso));
    };
    afterEach(() => {
      vi.useRealTimers();
    });

    it('on 1 March the daily chart\'s 30 days reach back to 31 January: a write keeps that day, and prunes older months', async () => {
      clockAt('2027-03-01T08:00:00Z'); // a page and a write on 1 March of a non-leap year
      const days = lastDays(30);
      expect(days[0]).toBe('2027-01-31');
      const { store, file } = inMemoryStore({
        days: { acct: { '2026-12-31': { images: 9, megapixels: 9 }, '2027-01-31': { images: 4, megapixels: 1 }, '2027-02-28': { images: 2, megapixels: 0.5 } } },
        quota: { 'acct:2026-12': 9, 'acct:2027-02': 2 },
      });
      await store.add('acct', '2027-03', 1);
      await store.flush();
      expect(Object.keys(file.content.days.acct!).sort()).toEqual(['2027-01-31', '2027-02-28', '2027-03-01']);
      expect(file.content.quota).toEqual({ 'acct:2027-02': 2 });
      const chart = (await store.dailyUsage('acct', days))!;
      expect([chart[0], chart.at(-2), chart.at(-1)]).toEqual([{ images: 4, megapixels: 1 }, { images: 2, megapixels: 0.5 }, { images: 1, megapixels: 1 }]);
      await store.close();
    });

    it('a cutout charged in October and recorded just after midnight on 1 November counts on 31 October: in October\'s total and chart', async () => {
      clockAt('2026-11-01T00:00:00.500Z');
      const { store, file } = inMemoryStore();
      await store.add('acct', '2026-10', 1.5);
      await store.close();
      expect(file.content.days).toEqual({ acct: { '2026-10-31': { images: 1, megapixels: 1.5 } } });
      expect(await store.get('acct', '2026-10')).toEqual({ month: '2026-10', images: 1, megapixels: 1.5 });
    });
  });
});
