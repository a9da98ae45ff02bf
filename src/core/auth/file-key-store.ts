import { mkdir, open, readFile, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { hashesEqual, keyIdOf } from './api-key.js';
import { expireBy, newKey, NotFoundError } from './key-records.js';
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
}

const EMPTY: KeyFile = { version: 1, accounts: [], keys: [] };
const LOCK_STALE_MS = 10_000;

/**
 * The embedded key store: one JSON file of accounts and key hashes. Readers pick up changes made
 * by other processes without a restart; writers take a lock file and replace the file by rename,
 * so a reader never sees a half-written file.
 */
export class FileKeyStore implements KeyAdmin {
  private readonly file: string;
  private readonly reloadIntervalMs: number;
  private snapshot: { mtimeMs: number; size: number; byId: Map<string, KeyRecord[]>; accounts: Map<string, Account> } | undefined;
  private lastCheck = 0;
  private loading: Promise<void> | undefined;

  constructor(options: FileKeyStoreOptions) {
    this.file = path.resolve(options.file);
    this.reloadIntervalMs = options.reloadIntervalMs ?? 1000;
  }

  async findByHash(hash: string): Promise<KeyLookup | undefined> {
    await this.refresh();
    const candidates = this.snapshot?.byId.get(keyIdOf(hash)) ?? [];
    const key = candidates.find((k) => hashesEqual(k.hash, hash));
    if (!key) return undefined;
    const account = this.snapshot?.accounts.get(key.accountId);
    return account ? { key, account } : undefined;
  }

  async createKey(options: CreateKeyOptions): Promise<{ key: string; record: KeyRecord }> {
    const created = newKey(options);
    await this.update((data) => {
      const account = data.accounts.find((a) => a.id === options.accountId);
      if (account) account.plan = options.plan;
      else data.accounts.push({ id: options.accountId, plan: options.plan, status: 'active' });
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
      const account = data.accounts.find((a) => a.id === old.accountId)!;
      const created = newKey({ accountId: old.accountId, plan: account.plan, expiresAt: old.expiresAt ? new Date(old.expiresAt) : null, allowedIps: old.allowedIps, allowedOrigins: old.allowedOrigins, label: old.label });
      data.keys[index] = expireBy(old, new Date(Date.now() + overlapMs));
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

  /** Read-modify-write under the lock file. */
  async update(change: (data: KeyFile) => void): Promise<void> {
    await mkdir(path.dirname(this.file), { recursive: true });
    const release = await this.lock();
    try {
      const data = await this.read();
      change(data);
      const partial = `${this.file}.${process.pid}.tmp`;
      const handle = await open(partial, 'w', 0o600);
      try {
        await handle.writeFile(`${JSON.stringify(data, null, 2)}\n`);
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(partial, this.file);
    } finally {
      await release();
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

  private async refresh(): Promise<void> {
    if (Date.now() - this.lastCheck < this.reloadIntervalMs && this.snapshot) return;
    this.loading ??= this.reload().finally(() => {
      this.loading = undefined;
    });
    await this.loading;
  }

  private async reload(): Promise<void> {
    this.lastCheck = Date.now();
    const info = await stat(this.file).catch(() => undefined);
    if (!info) {
      this.snapshot = { mtimeMs: 0, size: 0, byId: new Map(), accounts: new Map() };
      return;
    }
    if (this.snapshot && this.snapshot.mtimeMs === info.mtimeMs && this.snapshot.size === info.size) return;
    const data = await this.read();
    const byId = new Map<string, KeyRecord[]>();
    for (const key of data.keys) byId.set(key.id, [...(byId.get(key.id) ?? []), key]);
    this.snapshot = {
      mtimeMs: info.mtimeMs,
      size: info.size,
      byId,
      accounts: new Map(data.accounts.map((a) => [a.id, a])),
    };
  }

  private async lock(): Promise<() => Promise<void>> {
    const lockFile = `${this.file}.lock`;
    const started = Date.now();
    for (;;) {
      try {
        const handle = await open(lockFile, 'wx');
        await handle.close();
        return () => rm(lockFile, { force: true });
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
        const info = await stat(lockFile).catch(() => undefined);
        // A writer that died holding the lock leaves it behind: take it over once it is stale.
        if (info && Date.now() - info.mtimeMs > LOCK_STALE_MS) await rm(lockFile, { force: true });
        if (Date.now() - started > 2 * LOCK_STALE_MS) throw new Error(`could not lock ${lockFile}`);
        await new Promise((r) => setTimeout(r, 5 + Math.random() * 20));
      }
    }
  }
}

function findKey(data: KeyFile, keyId: string): KeyRecord {
  const key = data.keys.find((k) => k.id === keyId);
  if (!key) throw new NotFoundError(`no key ${keyId}`);
  return key;
}
