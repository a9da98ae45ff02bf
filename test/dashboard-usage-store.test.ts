import { mkdtemp, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { dayOf, FileKeyStore } from '../src/core/index.js';
import { monthOf } from '../src/core/limits/usage-meter.js';
import { FileDashboardStore } from '../src/dashboard/index.js';
import { emptyUsage, FileUsageStore, type UsageSection } from '../src/dashboard/stores/file-usage.js';

async function freshStore(dir?: string) {
  const folder = dir ?? (await mkdtemp(path.join(os.tmpdir(), 'bgcut-usage-')));
  const keys = new FileKeyStore({ file: path.join(folder, 'keys.json'), reloadIntervalMs: 0 });
  return { folder, store: new FileDashboardStore(keys) };
}

describe('FileDashboardStore.usage: the month\'s quota and usage without Redis', () => {
  const month = monthOf(new Date());
  const today = dayOf(new Date());

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
});
