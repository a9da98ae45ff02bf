import { mkdir, mkdtemp, readFile, utimes, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FileKeyStore } from '../src/core/index.js';
import { signal } from './helpers/within.js';

const tempFile = async () => path.join(await mkdtemp(path.join(os.tmpdir(), 'bgcut-lock-')), 'keys.json');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('FileKeyStore writers exclude each other', () => {
  it('a live writer holding the lock past the stale time keeps it: the second write waits, and neither is lost', async () => {
    const file = await tempFile();
    // Two processes' stores on one file (two instances behave as two processes: nothing is shared in memory).
    const slow = new FileKeyStore({ file, lockStaleMs: 2000 });
    const quick = new FileKeyStore({ file, lockStaleMs: 2000 });
    const order: string[] = [];
    const slowHolds = signal();
    const slowWrite = slow.update(async (data) => {
      slowHolds.resolve();
      data.accounts.push({ id: 'acct_slow', plan: 'free', status: 'active' });
      // Holds the lock twice as long as the stale time, alive all along (a slow disk, a busy machine).
      await sleep(4500);
      order.push('slow');
    });
    // The second writer starts once the first holds the lock (its update runs under it), not after
    // a fixed wait that a busy box can outrun before the first has taken it.
    await slowHolds.promise;
    const quickWrite = quick.update((data) => {
      data.accounts.push({ id: 'acct_quick', plan: 'free', status: 'active' });
      order.push('quick');
    });
    await Promise.all([slowWrite, quickWrite]);
    const stored = JSON.parse(await readFile(file, 'utf8'));
    expect(stored.accounts.map((a: { id: string }) => a.id).sort()).toEqual(['acct_quick', 'acct_slow']);
    expect(order).toEqual(['slow', 'quick']);
  });

  it('concurrent revocations and creations from many stores all land', async () => {
    const file = await tempFile();
    const stores = Array.from({ length: 6 }, () => new FileKeyStore({ file, reloadIntervalMs: 0 }));
    const created = await Promise.all(stores.map((s, i) => s.createKey({ accountId: `acct_${i}`, plan: 'free' })));
    await Promise.all(created.map(({ record }, i) => stores[(i + 1) % stores.length]!.revokeKey(record.id)));
    const keys = await stores[0]!.listKeys();
    expect(keys).toHaveLength(6);
    expect(keys.every((k) => k.revokedAt)).toBe(true);
  });

  it.each([
    ['a lock directory', (p: string) => mkdir(p)],
    ['a plain lock file of earlier versions', (p: string) => writeFile(p, '')],
  ])('%s left by a writer that died is taken over once stale', async (_what, leave) => {
    const file = await tempFile();
    await leave(`${file}.lock`);
    const minuteAgo = new Date(Date.now() - 60_000);
    await utimes(`${file}.lock`, minuteAgo, minuteAgo);
    const store = new FileKeyStore({ file, reloadIntervalMs: 0 });
    await store.createKey({ accountId: 'acct_after_crash', plan: 'free' });
    expect((await store.listAccounts()).map((a) => a.id)).toEqual(['acct_after_crash']);
  });
});
