import { mkdir, readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import lockfile from 'proper-lockfile';
import writeFileAtomic from 'write-file-atomic';
import { hashesEqual, keyIdOf } from './api-key.js';
import { expireBy, KeyAlreadyReplacedError, newKey, NotFoundError, TooManyKeysError } from './key-records.js';
import type { Account, CreateKeyOptions, KeyAdmin, KeyLookup, KeyRecord } from './key-store.js';

export interface KeyFile {
  version: 1;
  accounts: Account[];
  keys: KeyRecord[];
}

export interface FileKeyStoreOptions {
  /** The JSON file holding accounts and key hashes. Created on the first write. */
  file: string;
  /** How often, at most, the file's mtime is checked for changes made by other processes. Default 1000 ms. */
  reloadIntervalMs?: number;
  /** How old a lock must be before a writer that died holding it is taken to be gone. Default 10 000 ms. */
  lockStaleMs?: number;
  /** The clock, in ms (tests). Default Date.now. */
  now?: () => number;
}

interface Snapshot {
  mtimeMs: number;
  size: number;
  byId: Map<string, KeyRecord[]>;
  accounts: Map<string, Account>;
}

const EMPTY: KeyFile = { version: 1, accounts: [], keys: [] };
const LOCK_STALE_MS = 10_000;
const LOCK_WAIT_MS = 30_000;

/**
 * The embedded key store: one JSON file of accounts and key hashes. Readers pick up changes made
 * by other processes without a restart. Writers hold a proper-lockfile lock (a `.lock` directory
 * whose mtime the holder keeps fresh, so only a dead holder's lock ever looks stale) and replace
 * the file with write-file-atomic (temp file, fsync, rename), so a reader never sees a
 * half-written file and no two writers read-modify-write at once.
 */
export class FileKeyStore implements KeyAdmin {
  /** The key file's absolute path (the dashboard's file store keeps its own file beside it). */
  readonly file: string;
  private readonly reloadIntervalMs: number;
  private readonly lockStaleMs: number;
  private readonly now: () => number;
  private snapshot: Snapshot | undefined;
  private lastCheck = 0;
  private loading: Promise<Snapshot> | undefined;

  constructor(options: FileKeyStoreOptions) {
    this.file = path.resolve(options.file);
    this.reloadIntervalMs = options.reloadIntervalMs ?? 1000;
    this.lockStaleMs = options.lockStaleMs ?? LOCK_STALE_MS;
    this.now = options.now ?? (() => Date.now());
  }

  async findByHash(hash: string): Promise<KeyLookup | undefined> {
    const snapshot = await this.refresh();
    const candidates = snapshot.byId.get(keyIdOf(hash)) ?? [];
    const key = candidates.find((k) => hashesEqual(k.hash, hash));
    if (!key) return undefined;
    const account = snapshot.accounts.get(key.accountId);
    return account ? { key, account } : undefined;
  }

  async createKey(options: CreateKeyOptions): Promise<{ key: string; record: KeyRecord }> {
    const created = newKey(options);
    await this.update((data) => {
      const account = data.accounts.find((a) => a.id === options.accountId);
      if (account) account.plan = options.plan;
      else data.accounts.push({ id: options.accountId, plan: options.plan, status: 'active' });
      const now = created.record.createdAt;
      const active = data.keys.filter((k) => k.accountId === options.accountId && !k.revokedAt && !(k.expiresAt && k.expiresAt <= now));
      // Checked under the file's lock, with the write: parallel creations cannot both pass it.
      if (!options.revokeOthers && active.length >= (options.maxActiveKeys ?? Infinity)) {
        throw new TooManyKeysError(options.maxActiveKeys!);
      }
      if (options.revokeOthers) {
        for (const other of data.keys) {
          if (other.accountId === options.accountId && !other.revokedAt) other.revokedAt = created.record.createdAt;
        }
      }
      data.keys.push(created.record);
    });
    return created;
  }

  async listKeys(accountId?: string): Promise<KeyRecord[]> {
    const data = await this.read();
    return data.keys.filter((k) => !accountId || k.accountId === accountId);
  }

  async revokeKey(keyId: string): Promise<KeyRecord> {
    let revoked: KeyRecord | undefined;
    await this.update((data) => {
      const key = findKey(data, keyId);
      key.revokedAt ??= new Date().toISOString();
      revoked = { ...key };
    });
    return revoked!;
  }

  async rotateKey(keyId: string, overlapMs: number): Promise<{ key: string; record: KeyRecord; old: KeyRecord }> {
    let result: { key: string; record: KeyRecord; old: KeyRecord } | undefined;
    await this.update((data) => {
      const index = data.keys.indexOf(findKey(data, keyId));
      const old = data.keys[index]!;
      if (old.revokedAt) throw new Error(`key ${keyId} is revoked`);
      if (old.replacedBy) throw new KeyAlreadyReplacedError(keyId, old.replacedBy);
      // No plan: it is the account's, not the key's (as in RedisKeyStore).
      const created = newKey({ accountId: old.accountId, expiresAt: old.expiresAt ? new Date(old.expiresAt) : null, allowedIps: old.allowedIps, allowedOrigins: old.allowedOrigins, label: old.label });
      data.keys[index] = { ...expireBy(old, new Date(Date.now() + overlapMs)), replacedBy: created.record.id };
      data.keys.push(created.record);
      result = { ...created, old: data.keys[index]! };
    });
    return result!;
  }

  async listAccounts(): Promise<Account[]> {
    return (await this.read()).accounts;
  }

  async setAccountStatus(accountId: string, status: Account['status']): Promise<Account> {
    let updated: Account | undefined;
    await this.update((data) => {
      const account = data.accounts.find((a) => a.id === accountId);
      if (!account) throw new NotFoundError(`no account ${accountId}`);
      account.status = status;
      updated = { ...account };
    });
    return updated!;
  }

  /** Read-modify-write under the lock; the file is replaced only while the lock is still ours. */
  async update(change: (data: KeyFile) => void | Promise<void>): Promise<void> {
    await mkdir(path.dirname(this.file), { recursive: true });
    let compromised: Error | undefined;
    const release = await this.lock((error) => (compromised = error));
    try {
      const data = await this.read();
      await change(data);
      // Another writer took the lock (this process stalled past the stale time): writing now
      // could undo its change, so this change fails instead.
      if (compromised) throw new Error(`lost the lock on ${this.file}; the change was not written`, { cause: compromised });
      await writeFileAtomic(this.file, `${JSON.stringify(data, null, 2)}\n`, { mode: 0o600, fsync: true });
    } finally {
      await release().catch(() => {}); // a compromised lock is no longer ours to release
    }
    this.lastCheck = 0;
  }

  /** The whole file as it is now (for stores that keep more in it, such as the dashboard's). */
  async readData(): Promise<KeyFile> {
    return this.read();
  }

  private async read(): Promise<KeyFile> {
    const text = await readFile(this.file, 'utf8').catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return undefined;
      throw error;
    });
    if (text === undefined) return structuredClone(EMPTY);
    const data = JSON.parse(text) as KeyFile;
    if (data.version !== 1 || !Array.isArray(data.accounts) || !Array.isArray(data.keys)) {
      throw new Error(`${this.file} is not a version 1 key file`);
    }
    return data;
  }

  private async refresh(): Promise<Snapshot> {
    if (this.now() - this.lastCheck < this.reloadIntervalMs && this.snapshot) return this.snapshot;
    this.loading ??= this.reload().finally(() => {
      this.loading = undefined;
    });
    return this.loading;
  }

  private async reload(): Promise<Snapshot> {
    this.lastCheck = this.now();
    const info = await stat(this.file).catch(() => undefined);
    if (!info) return (this.snapshot = { mtimeMs: 0, size: 0, byId: new Map(), accounts: new Map() });
    if (this.snapshot && this.snapshot.mtimeMs === info.mtimeMs && this.snapshot.size === info.size) return this.snapshot;
    const data = await this.read();
    const byId = new Map<string, KeyRecord[]>();
    for (const key of data.keys) byId.set(key.id, [...(byId.get(key.id) ?? []), key]);
    return (this.snapshot = {
      mtimeMs: info.mtimeMs,
      size: info.size,
      byId,
      accounts: new Map(data.accounts.map((a) => [a.id, a])),
    });
  }

  private async lock(onCompromised: (error: Error) => void): Promise<() => Promise<void>> {
    const lockfilePath = `${this.file}.lock`;
    const options = {
      lockfilePath,
      realpath: false, // the key file need not exist yet
      stale: this.lockStaleMs,
      // Waits for a live holder up to 30 s (or twice the stale time), polling every 100 ms at most.
      retries: { retries: Math.ceil(Math.max(LOCK_WAIT_MS, 2 * this.lockStaleMs) / 100), minTimeout: 10, maxTimeout: 100, randomize: true },
      onCompromised,
    };
    // Earlier versions of this store locked with a plain file at this path: once stale, remove it
    // (proper-lockfile's lock is a directory and would retry on such a file until it gives up).
    const info = await stat(lockfilePath).catch(() => undefined);
    if (info?.isFile() && this.now() - info.mtimeMs > this.lockStaleMs) await rm(lockfilePath, { force: true });
    return lockfile.lock(this.file, options);
  }
}

function findKey(data: KeyFile, keyId: string): KeyRecord {
  const key = data.keys.find((k) => k.id === keyId);
  if (!key) throw new NotFoundError(`no key ${keyId}`);
  return key;
}
