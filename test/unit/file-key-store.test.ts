import { rmSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { hashApiKey } from '../../src/core/auth/api-key.js';
import { FileKeyStore, type KeyFile } from '../../src/core/auth/file-key-store.js';
import { expectRevocationSeenAt } from '../helpers/key-store-staleness.js';

/**
 * FileKeyStore alone, on real files: when a reader looks at the file again (its clock injected,
 * the file's mtime set with utimes), the file's mode, a file it cannot read, and its lock: a plain
 * lock file of earlier versions, and a lock taken over while a change was being made. Where the
 * test must see what proper-lockfile did, it watches the graceful-fs calls proper-lockfile makes
 * (the same module object, from the same node_modules).
 */
const gracefulFs = createRequire(import.meta.url)('graceful-fs') as typeof import('node:fs');

afterEach(() => {
  vi.restoreAllMocks();
});

const tempFile = async () => path.join(await mkdtemp(path.join(os.tmpdir(), 'bgcut-fks-')), 'keys.json');
/** Edits the key file behind the store's back, then sets its mtime (seconds since the epoch). */
async function edit(file: string, change: (data: KeyFile) => void, mtimeSeconds: number): Promise<void> {
  const data = JSON.parse(await readFile(file, 'utf8')) as KeyFile;
  change(data);
  await writeFile(file, JSON.stringify(data, null, 2));
  await utimes(file, mtimeSeconds, mtimeSeconds);
}

/** Resolves with the error code (or 'ok') of the first call of graceful-fs's `method` on `target` to finish. */
function firstCallOn(method: 'mkdir' | 'stat', target: string): Promise<string> {
  return new Promise((resolve) => {
    const original = gracefulFs[method] as (...args: unknown[]) => void;
    let seen = false;
    vi.spyOn(gracefulFs, method).mockImplementation(((...args: unknown[]) => {
      const callback = args.at(-1) as (error: NodeJS.ErrnoException | null, ...rest: unknown[]) => void;
      if (seen || args[0] !== target) return original.apply(gracefulFs, args);
      seen = true;
      return original.apply(gracefulFs, [
        ...args.slice(0, -1),
        (error: NodeJS.ErrnoException | null, ...rest: unknown[]) => {
          callback(error, ...rest);
          resolve(error?.code ?? 'ok');
        },
      ]);
    }) as never);
  });
}

describe('FileKeyStore: when a reader reads the file again', () => {
  it('at most every reloadIntervalMs (1000 here): a change made elsewhere is seen at 1000 ms, not at 999', async () => {
    const file = await tempFile();
    const clock = { now: 2_000_000 };
    const reader = new FileKeyStore({ file, reloadIntervalMs: 1000, now: () => clock.now });
    await expectRevocationSeenAt(reader, new FileKeyStore({ file }), clock, 1000, 'acct_i');
  });

  it('when the file\'s size changed though its mtime did not, and when its mtime changed though its size did not', async () => {
    const file = await tempFile();
    const reader = new FileKeyStore({ file, reloadIntervalMs: 0 });
    const { key } = await new FileKeyStore({ file }).createKey({ accountId: 'acct_m', plan: 'aaaa' });
    const lookUp = async () => (await reader.findByHash(hashApiKey(key)))?.account.plan;
    await edit(file, (data) => void (data.accounts[0]!.plan = 'aaaa'), 1_700_000_000);
    expect(await lookUp()).toBe('aaaa');
    // Same mtime (a write within the file system's time resolution), another size.
    await edit(file, (data) => void (data.accounts[0]!.plan = 'bb'), 1_700_000_000);
    expect(await lookUp()).toBe('bb');
    // Same size, another mtime.
    await edit(file, (data) => void (data.accounts[0]!.plan = 'cc'), 1_700_000_001);
    expect(await lookUp()).toBe('cc');
  });
});

describe('FileKeyStore: the file itself', () => {
  it('is written readable and writable by its owner only (mode 0600): it holds the key hashes', async () => {
    const file = await tempFile();
    await new FileKeyStore({ file }).createKey({ accountId: 'acct_0600', plan: 'p' });
    expect((await stat(file)).mode & 0o777).toBe(0o600);
  });

  it('a key file that cannot be read is an error, never an empty store (only a missing file is)', async () => {
    const file = await tempFile();
    await mkdir(file); // EISDIR on read (the tests run as root: a file without permissions would still be read)
    const store = new FileKeyStore({ file, reloadIntervalMs: 0 });
    await expect(store.listKeys()).rejects.toMatchObject({ code: 'EISDIR' });
    await expect(store.findByHash(hashApiKey('bgcut_whatever'))).rejects.toMatchObject({ code: 'EISDIR' });
    await expect(store.createKey({ accountId: 'acct_d', plan: 'p' })).rejects.toMatchObject({ code: 'EISDIR' });
    expect((await stat(file)).isDirectory()).toBe(true);
  });
});

describe('FileKeyStore: its lock', () => {
  it('a plain lock file of earlier versions is removed only once older than lockStaleMs by the store\'s clock, not at exactly lockStaleMs', async () => {
    for (const [age, removed] of [[10_000, false], [10_001, true]] as const) {
      const file = await tempFile();
      const lockPath = `${file}.lock`;
      await writeFile(lockPath, '');
      const mtime = Math.floor(Date.now() / 1000); // fresh to proper-lockfile, which reads the real time
      await utimes(lockPath, mtime, mtime);
      const store = new FileKeyStore({ file, lockStaleMs: 10_000, now: () => mtime * 1000 + age });
      const firstTry = firstCallOn('mkdir', lockPath);
      const created = store.createKey({ accountId: 'acct_lock', plan: 'p' });
      // The first try to take the lock finds the old writer's file still there, or not.
      expect(await firstTry, `lock file ${age} ms old`).toBe(removed ? 'ok' : 'EEXIST');
      if (!removed) await rm(lockPath); // the old writer finishes: the store then takes the lock
      await created;
      expect((await store.listAccounts()).map((a) => a.id)).toEqual(['acct_lock']);
      vi.restoreAllMocks();
    }
  });

  it('a stale plain lock file that another writer removes first is no error', async () => {
    const file = await tempFile();
    const lockPath = `${file}.lock`;
    await writeFile(lockPath, '');
    const minuteAgo = Math.floor(Date.now() / 1000) - 60;
    await utimes(lockPath, minuteAgo, minuteAgo);
    // The store reads its clock once, after it has found the stale file and before it removes it:
    // that is when a second writer that found it too removes it first.
    const store = new FileKeyStore({
      file,
      now: () => {
        rmSync(lockPath, { force: true });
        return Date.now();
      },
    });
    await store.createKey({ accountId: 'acct_second', plan: 'p' });
    expect((await store.listAccounts()).map((a) => a.id)).toEqual(['acct_second']);
  });

  it('a change whose lock was taken over meanwhile (this writer stalled past the stale time) fails and writes nothing', async () => {
    const file = await tempFile();
    const lockPath = `${file}.lock`;
    const store = new FileKeyStore({ file, lockStaleMs: 2000 });
    await store.createKey({ accountId: 'acct_before', plan: 'p' });
    const before = await readFile(file, 'utf8');
    const failure = await store
      .update(async (data) => {
        data.accounts.push({ id: 'acct_lost', plan: 'p', status: 'active' });
        // Another writer removes the lock as stale and takes it: a new lock directory, another mtime.
        await rm(lockPath, { recursive: true });
        await mkdir(lockPath);
        await utimes(lockPath, 1_600_000_000, 1_600_000_000);
        // proper-lockfile checks its lock every second (half the stale time, at least 1 s): this
        // change goes on once that check has seen the lock is no longer this writer's.
        await firstCallOn('stat', lockPath);
      })
      .catch((error: unknown) => error as Error & { cause?: { code?: string } });
    expect(failure).toBeInstanceOf(Error);
    expect((failure as Error).message).toBe(`lost the lock on ${file}; the change was not written`);
    expect((failure as Error & { cause: { code: string } }).cause.code).toBe('ECOMPROMISED');
    expect(await readFile(file, 'utf8')).toBe(before);
  });
});
