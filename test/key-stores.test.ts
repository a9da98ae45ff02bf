import { execFile } from 'node:child_process';
import { mkdtemp, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { FileKeyStore, hashApiKey, KeyAlreadyReplacedError, RedisKeyStore, type KeyAdmin } from '../src/core/index.js';
import { authenticate } from '../src/core/auth/authenticate.js';
import { newKey } from '../src/core/auth/key-records.js';
import { RedisDashboardStore } from '../src/dashboard/index.js';
import { ApiError } from '../src/core/errors.js';
import { captureOutput, recordIssuedKeys } from './helpers/log-capture.js';
import { redisTopologies, useRedisTopology } from './helpers/redis-topologies.js';

const run = promisify(execFile);
const CLI = path.resolve('dist/src/cli/keys.js');

async function tempFile(name: string): Promise<string> {
  return path.join(await mkdtemp(path.join(os.tmpdir(), 'bgcut-ks-')), name);
}

/** Outcome of authenticating with a key against a store: the account id, or the error code. */
async function outcome(store: KeyAdmin, key: string, extra: { ip?: string } = {}): Promise<string> {
  try {
    const identity = await authenticate({ headers: { 'x-api-key': key }, url: '/', clientIp: extra.ip }, store);
    return identity.account.id;
  } catch (error) {
    return (error as ApiError).code;
  }
}

// Every Redis test here runs on one server and on a three-master Redis Cluster.
const topologies = redisTopologies.map((topology) => ({ name: topology.name, use: useRedisTopology(topology) }));

/** One interface, two implementations (the Redis one on each topology): the same behaviour from each. */
const stores: [string, () => Promise<KeyAdmin>][] = [
  ['FileKeyStore', async () => new FileKeyStore({ file: await tempFile('keys.json'), reloadIntervalMs: 0 })],
  ...topologies.map(({ name, use }): [string, () => Promise<KeyAdmin>] => [
    `RedisKeyStore on ${name}`,
    async () => new RedisKeyStore({ redis: use.redis, keyPrefix: `t${Math.random().toString(36).slice(2)}`, cacheTtlMs: 0 }),
  ]),
];

describe.each(stores)('%s', (_name, make) => {
  it('creates keys that authenticate, stores only their hash', async () => {
    const store = await make();
    const { key, record } = await store.createKey({ accountId: 'acct_a', plan: 'free' });
    recordIssuedKeys([key]);
    expect(record.hash).toBe(hashApiKey(key));
    expect(JSON.stringify(await store.listKeys())).not.toContain(key);
    expect(await outcome(store, key)).toBe('acct_a');
  });

  it('revokes, expires and suspends', async () => {
    const store = await make();
    const a = await store.createKey({ accountId: 'acct_b', plan: 'free' });
    const b = await store.createKey({ accountId: 'acct_c', plan: 'free', expiresAt: new Date(Date.now() - 1) });
    recordIssuedKeys([a.key, b.key]);
    await store.revokeKey(a.record.id);
    expect(await outcome(store, a.key)).toBe('revoked_api_key');
    expect(await outcome(store, b.key)).toBe('expired_api_key');
    const c = await store.createKey({ accountId: 'acct_d', plan: 'free' });
    recordIssuedKeys([c.key]);
    await store.setAccountStatus('acct_d', 'suspended');
    expect(await outcome(store, c.key)).toBe('account_suspended');
    await store.setAccountStatus('acct_d', 'active');
    expect(await outcome(store, c.key)).toBe('acct_d');
  });

  it('rotates with an overlap during which both keys work', async () => {
    const store = await make();
    const old = await store.createKey({ accountId: 'acct_r', plan: 'free' });
    const rotated = await store.rotateKey(old.record.id, 60_000);
    recordIssuedKeys([old.key, rotated.key]);
    expect(await outcome(store, old.key)).toBe('acct_r');
    expect(await outcome(store, rotated.key)).toBe('acct_r');
    expect(Date.parse(rotated.old.expiresAt!)).toBeGreaterThan(Date.now() + 50_000);
    const again = await store.rotateKey(rotated.record.id, 0);
    recordIssuedKeys([again.key]);
    expect(await outcome(store, rotated.key)).toBe('expired_api_key');
    expect(await outcome(store, again.key)).toBe('acct_r');
  });

  it('refuses to rotate a key that is already being replaced; the successor keeps the planned expiry, never the overlap\'s end', async () => {
    const store = await make();
    const planned = new Date(Date.now() + 30 * 86_400_000);
    const old = await store.createKey({ accountId: 'acct_rr', plan: 'free', expiresAt: planned });
    const rotated = await store.rotateKey(old.record.id, 3_600_000);
    recordIssuedKeys([old.key, rotated.key]);
    expect(rotated.old.replacedBy).toBe(rotated.record.id);
    expect(rotated.record.expiresAt).toBe(planned.toISOString());
    const error = await store.rotateKey(old.record.id, 3_600_000).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(KeyAlreadyReplacedError);
    expect((error as KeyAlreadyReplacedError).successorId).toBe(rotated.record.id);
    expect((await store.listKeys('acct_rr')).filter((k) => !k.revokedAt)).toHaveLength(2);
  });

  it('restricts keys to addresses (CIDR) when asked', async () => {
    const store = await make();
    const { key } = await store.createKey({ accountId: 'acct_ip', plan: 'free', allowedIps: ['10.1.0.0/16', '::1'] });
    recordIssuedKeys([key]);
    expect(await outcome(store, key, { ip: '10.1.2.3' })).toBe('acct_ip');
    expect(await outcome(store, key, { ip: '::ffff:10.1.2.3' })).toBe('acct_ip');
    expect(await outcome(store, key, { ip: '::1' })).toBe('acct_ip');
    expect(await outcome(store, key, { ip: '10.2.0.1' })).toBe('ip_not_allowed');
    expect(await outcome(store, key)).toBe('ip_not_allowed');
  });
});

describe('FileKeyStore across processes', () => {
  it('loses nothing when two processes write the file at once', async () => {
    const file = await tempFile('keys.json');
    const script = `
      import { FileKeyStore } from ${JSON.stringify(path.resolve('dist/src/core/index.js'))};
      const store = new FileKeyStore({ file: process.argv[1] });
      const ids = [];
      for (let i = 0; i < 40; i++) ids.push((await store.createKey({ accountId: 'acct_' + process.argv[2] + '_' + i, plan: 'free' })).record.id);
      console.log(JSON.stringify(ids));`;
    const writers = await Promise.all(['x', 'y'].map((who) => run(process.execPath, ['--input-type=module', '-e', script, file, who])));
    const written = writers.flatMap((w) => JSON.parse(w.stdout) as string[]);
    const data = JSON.parse(await readFile(file, 'utf8'));
    expect(written).toHaveLength(80);
    expect(data.keys.map((k: { id: string }) => k.id).sort()).toEqual([...written].sort());
    expect(data.accounts).toHaveLength(80);
  });

  it('sees changes made by another process without a restart', async () => {
    const file = await tempFile('keys.json');
    const reader = new FileKeyStore({ file, reloadIntervalMs: 50 });
    const writer = new FileKeyStore({ file });
    const { key, record } = await writer.createKey({ accountId: 'acct_live', plan: 'free' });
    recordIssuedKeys([key]);
    expect(await outcome(reader, key)).toBe('acct_live');
    await writer.revokeKey(record.id);
    await new Promise((r) => setTimeout(r, 100));
    expect(await outcome(reader, key)).toBe('revoked_api_key');
  });
});

describe('bgcut-keys CLI', () => {
  const cli = async (args: string[], env: Record<string, string> = {}) => {
    let result: { code: number; stdout: string; stderr: string };
    try {
      const { stdout, stderr } = await run(process.execPath, [CLI, ...args], { env: { ...process.env, ...env } });
      result = { code: 0, stdout, stderr };
    } catch (error) {
      const e = error as { code: number; stdout: string; stderr: string };
      result = { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
    // The CLI's output goes to the key scan, all of it except the one line whose job is to show
    // a new key once (the first line of `keys create` and `keys rotate`).
    const showsKey = args[0] === 'keys' && (args[1] === 'create' || args[1] === 'rotate') && result.code === 0;
    captureOutput(`${showsKey ? result.stdout.split('\n').slice(1).join('\n') : result.stdout}\n${result.stderr}\n`);
    return result;
  };

  it.each([['file'], ...topologies.map((t) => [t.name])])('manages keys and accounts in the store: %s', async (kind) => {
    const file = await tempFile('keys.json');
    const use = topologies.find((t) => t.name === kind)?.use;
    const prefixArgs = !use ? ['--file', file] : ['--redis', use.url];
    const store: KeyAdmin = !use ? new FileKeyStore({ file, reloadIntervalMs: 0 }) : new RedisKeyStore({ redis: use.redis, cacheTtlMs: 0 });
    const account = `acct_cli_${kind.replace(/\W+/g, "_")}`;

    const created = await cli(['keys', 'create', '--account', account, '--plan', 'pro', '--expires', '30d', ...prefixArgs]);
    expect(created.code).toBe(0);
    const key = created.stdout.split('\n')[0]!;
    recordIssuedKeys([key]);
    expect(await outcome(store, key)).toBe(account);

    const listed = await cli(['keys', 'list', '--account', account, ...prefixArgs]);
    expect(listed.stdout).toMatch(/key_[0-9a-f]{12}/);
    expect(listed.stdout).not.toContain(key);
    const keyId = /key_[0-9a-f]{12}/.exec(listed.stdout)![0];

    const rotated = await cli(['keys', 'rotate', keyId, '--overlap', '1h', ...prefixArgs]);
    const newKey = rotated.stdout.split('\n')[0]!;
    recordIssuedKeys([newKey]);
    expect(await outcome(store, newKey)).toBe(account);
    expect(await outcome(store, key)).toBe(account);

    expect((await cli(['accounts', 'suspend', account, ...prefixArgs])).stdout).toContain('suspended');
    expect(await outcome(store, newKey)).toBe('account_suspended');
    await cli(['accounts', 'resume', account, ...prefixArgs]);
    expect((await cli(['keys', 'revoke', keyId, ...prefixArgs])).code).toBe(0);
    expect(await outcome(store, key)).toBe('revoked_api_key');
  });

  it('lists plans, and refuses unknown plans and bad durations with exit code 2', async () => {
    expect((await cli(['plans', 'list'])).stdout).toContain('free');
    const file = await tempFile('keys.json');
    expect((await cli(['keys', 'create', '--account', 'a', '--plan', 'gold', '--file', file])).code).toBe(2);
    expect((await cli(['keys', 'create', '--account', 'a', '--plan', 'pro', '--expires', 'soon', '--file', file])).code).toBe(2);
  });
});

describe('bgcut-keys redis migrate: keys stored by the single-slot layout of earlier releases', () => {
  it('copies accounts, keys and holders into the per-account layout, once; the keys then authenticate and revoke', async () => {
    const { redis } = topologies[0]!.use; // the old layout only ever ran on one server
    const prefix = `m${Math.random().toString(36).slice(2)}`;
    // Written as the earlier RedisKeyStore and RedisDashboardStore wrote them.
    const { key, record } = newKey({ accountId: 'acct_old', plan: 'pro' });
    recordIssuedKeys([key]);
    await redis.set(`${prefix}:account:acct_old`, JSON.stringify({ id: 'acct_old', plan: 'pro', status: 'active' }));
    await redis.sadd(`${prefix}:accounts`, 'acct_old');
    await redis.sadd(`${prefix}:account-keys:acct_old`, record.id);
    await redis.set(`${prefix}:key:${record.hash}`, JSON.stringify(record));
    await redis.set(`${prefix}:keyid:${record.id}`, record.hash);
    const holder = { email: 'old@example.com', accountId: 'acct_old', passwordHash: 'scrypt$1$1$1$AA$AA', updatedAt: new Date().toISOString() };
    await redis.set(`${prefix}:holder:old@example.com`, JSON.stringify(holder));
    await redis.set(`${prefix}:holder-of:acct_old`, 'old@example.com');

    const store = new RedisKeyStore({ redis, keyPrefix: prefix, cacheTtlMs: 0 });
    expect(await outcome(store, key)).toBe('invalid_api_key');
    expect(await store.migrateLegacyLayout()).toEqual({ accounts: 1, keys: 1 });
    expect(await new RedisDashboardStore({ redis, keyPrefix: prefix }).migrateLegacyHolders()).toBe(1);
    expect(await store.migrateLegacyLayout()).toEqual({ accounts: 0, keys: 0 });
    expect(await outcome(store, key)).toBe('acct_old');
    expect((await new RedisDashboardStore({ redis, keyPrefix: prefix }).findHolder('old@example.com'))?.accountId).toBe('acct_old');
    expect((await store.listKeys('acct_old')).map((r) => r.id)).toEqual([record.id]);
    await store.revokeKey(record.id);
    expect(await outcome(store, key)).toBe('revoked_api_key');
  });
});
