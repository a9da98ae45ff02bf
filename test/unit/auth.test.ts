import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { generateApiKey, hashApiKey } from '../../src/core/auth/api-key.js';
import { authenticate } from '../../src/core/auth/authenticate.js';
import { FileKeyStore } from '../../src/core/auth/file-key-store.js';
import { InvalidAllowListEntryError, ipAllowed, validateAllowedIps } from '../../src/core/auth/ip-allow-list.js';
import { KeyAlreadyReplacedError, NotFoundError, TooManyKeysError } from '../../src/core/auth/key-records.js';
import { isOrigin, validateAllowedOrigins } from '../../src/core/auth/origin-allow-list.js';
import { RedisKeyStore } from '../../src/core/auth/redis-key-store.js';
import { ApiError } from '../../src/core/errors.js';
import { useRedis } from '../helpers/use-redis.js';

// Auth alone: allow-lists, the key stores' ceilings and Redis-outage bound, authenticate's
// refusals. No server, no model (a real redis-server for the Redis store).

afterEach(() => {
  vi.restoreAllMocks();
});

/** Both key stores: revoking or rotating an unknown key, or changing an unknown account, is NotFoundError naming it. */
async function expectNotFoundNamingIt(store: FileKeyStore | RedisKeyStore): Promise<void> {
  for (const attempt of [() => store.revokeKey('key_nope'), () => store.rotateKey('key_nope', 1000)]) {
    const error = await attempt().catch((e: Error) => e);
    expect(error).toBeInstanceOf(NotFoundError);
    expect((error as Error).message).toBe('no key key_nope');
  }
  const noAccount = await store.setAccountStatus('acct_nope', 'suspended').catch((e: Error) => e);
  expect(noAccount).toBeInstanceOf(NotFoundError);
  expect((noAccount as Error).message).toBe('no account acct_nope');
}

describe('IP allow-lists', () => {
  it.each([
    // [client, list, allowed]
    ['192.0.2.7', ['192.0.2.7'], true],
    ['192.0.2.8', ['192.0.2.7'], false],
    ['10.1.2.3', ['10.0.0.0/8'], true],
    ['11.0.0.1', ['10.0.0.0/8'], false],
    ['192.0.2.255', ['192.0.2.0/24'], true],
    ['192.0.3.0', ['192.0.2.0/24'], false],
    ['203.0.113.9', ['0.0.0.0/0'], true],
    // IPv6 ranges longer than /32.
    ['2001:db8:1234:5::1', ['2001:db8:1234::/48'], true],
    ['2001:db8:1235::1', ['2001:db8:1234::/48'], false],
    ['2001:db8:1234:5678:9abc::1', ['2001:db8:1234:5678::/64'], true],
    ['2001:db8:1234:5679::1', ['2001:db8:1234:5678::/64'], false],
    ['2001:db8::1', ['2001:db8::1/128'], true],
    ['2001:db8::2', ['2001:db8::1/128'], false],
    ['2001:db8::1', ['2001:db8::1'], true],
    // IPv4-mapped IPv6 (what a dual-stack socket reports) against IPv4 entries.
    ['::ffff:10.1.2.3', ['10.0.0.0/8'], true],
    ['::FFFF:10.1.2.3', ['10.0.0.0/8'], true],
    ['::ffff:11.1.2.3', ['10.0.0.0/8'], false],
    ['::ffff:192.0.2.7', ['192.0.2.7'], true],
    ['::ffff:192.0.2.8', ['192.0.2.7'], false],
    ['::ffff:a01:203', ['10.0.0.0/8'], true],
    // And an IPv4 client against an IPv4-mapped entry.
    ['10.1.2.3', ['::ffff:10.0.0.0/104'], true],
    ['11.1.2.3', ['::ffff:10.0.0.0/104'], false],
    // Families do not mix otherwise.
    ['10.1.2.3', ['2001:db8::/32'], false],
    ['2001:db8::1', ['10.0.0.0/8'], false],
    // Not an address.
    ['', ['0.0.0.0/0'], false],
    ['not-an-ip', ['0.0.0.0/0'], false],
    ['::ffff:999.1.2.3', ['0.0.0.0/0'], false],
  ])('%s against %j: %s', (client, list, allowed) => {
    expect(ipAllowed(client, list)).toBe(allowed);
  });

  it('any entry of several may match', () => {
    expect(ipAllowed('198.51.100.4', ['192.0.2.0/24', '198.51.100.0/24'])).toBe(true);
    expect(ipAllowed('2001:db8:1234::9', ['10.0.0.0/8', '2001:db8:1234::/48'])).toBe(true);
  });

  it.each(['10.0.0.0/33', '2001:db8::/129', '10.0.0.0/8/1', 'host.example', '10.0.0.0/-1', '10.0.0.0/08', '10.0.0.0/', '10.0.0.0/1000', ''])('refuses the entry %j', (entry) => {
    expect(() => validateAllowedIps([entry])).toThrow(InvalidAllowListEntryError);
    expect(() => ipAllowed('10.0.0.1', [entry])).toThrow(InvalidAllowListEntryError);
  });

  it.each(['10.0.0.0/0', '10.0.0.0/32', '2001:db8::/0', '2001:db8::/128', '2001:db8::/100', '10.0.0.0/9'])('accepts the entry %j', (entry) => {
    expect(validateAllowedIps([entry])).toEqual([entry]);
  });

  it('validateAllowedIps: undefined passes, a non-string is named, the error names the entry', () => {
    expect(validateAllowedIps(undefined)).toBeUndefined();
    expect(() => validateAllowedIps([5 as unknown as string])).toThrow('"5" is not an IP address or CIDR range');
    const error = (() => {
      try {
        validateAllowedIps(['10.0.0.0/8', 'nope']);
      } catch (e) {
        return e as InvalidAllowListEntryError;
      }
    })();
    expect(error).toBeInstanceOf(RangeError);
    expect([error!.name, error!.entry]).toEqual(['InvalidAllowListEntryError', 'nope']);
  });
});

describe('origin allow-lists', () => {
  it.each([
    ['https://shop.example', true],
    ['http://localhost:8080', true],
    ['https://shop.example/', false],
    ['HTTPS://shop.example', false],
    ['ftp://shop.example', false],
    ['https://shop.example/path', false],
    ['shop.example', false],
  ])('%s is an origin: %s', (entry, ok) => {
    expect(isOrigin(entry)).toBe(ok);
  });

  it('validateAllowedOrigins names the first bad entry', () => {
    expect(validateAllowedOrigins(['https://a.example'])).toEqual(['https://a.example']);
    expect(validateAllowedOrigins(undefined)).toBeUndefined();
    expect(() => validateAllowedOrigins(['https://a.example', 'https://b.example/'])).toThrow('"https://b.example/" is not an origin');
    expect(() => validateAllowedOrigins(['nope'])).toThrow(expect.objectContaining({ name: 'InvalidAllowedOriginError', entry: 'nope' }));
  });
});

describe('FileKeyStore: the active-key ceiling is per account', () => {
  it('maxActiveKeys counts only the account\'s own active keys (not other accounts\', not revoked or expired ones)', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-auth-unit-'));
    const store = new FileKeyStore({ file: path.join(dir, 'keys.json'), reloadIntervalMs: 0 });
    // Another account with many keys does not count against this one.
    for (let i = 0; i < 3; i++) await store.createKey({ accountId: 'acct_other', plan: 'p' });
    await store.createKey({ accountId: 'acct_me', plan: 'p', maxActiveKeys: 2 });
    const second = await store.createKey({ accountId: 'acct_me', plan: 'p', maxActiveKeys: 2 });
    await expect(store.createKey({ accountId: 'acct_me', plan: 'p', maxActiveKeys: 2 })).rejects.toBeInstanceOf(TooManyKeysError);
    // A revoked key frees its place; so does an expired one.
    await store.revokeKey(second.record.id);
    const third = await store.createKey({ accountId: 'acct_me', plan: 'p', maxActiveKeys: 2 });
    await expect(store.createKey({ accountId: 'acct_me', plan: 'p', maxActiveKeys: 2 })).rejects.toBeInstanceOf(TooManyKeysError);
    await store.rotateKey(third.record.id, 0);
    await expect(store.createKey({ accountId: 'acct_me', plan: 'p', maxActiveKeys: 2 })).rejects.toBeInstanceOf(TooManyKeysError);
    const past = await store.createKey({ accountId: 'acct_old', plan: 'p', expiresAt: new Date(Date.now() - 1000) });
    expect(past.record.accountId).toBe('acct_old');
    await store.createKey({ accountId: 'acct_old', plan: 'p', maxActiveKeys: 1 });
    // revokeOthers is not refused by the ceiling: it leaves one key.
    const fresh = await store.createKey({ accountId: 'acct_me', plan: 'p', maxActiveKeys: 2, revokeOthers: true });
    const active = (await store.listKeys('acct_me')).filter((k) => !k.revokedAt && !(k.expiresAt && Date.parse(k.expiresAt) <= Date.now()));
    expect(active.map((k) => k.id)).toEqual([fresh.record.id]);
    expect((await store.listKeys('acct_other')).filter((k) => !k.revokedAt)).toHaveLength(3);
  });
});

describe('RedisKeyStore: while Redis is away, remembered keys are served for a bounded time', () => {
  const shared = useRedis();

  it('within maxStaleMs a remembered key (revoked since, too) keeps working; past it, the lookup fails; a key never seen fails at once', async () => {
    const store = new RedisKeyStore({ redis: shared.redis, keyPrefix: 'stale', cacheTtlMs: 1000 });
    const { key, record } = await store.createKey({ accountId: 'acct_s', plan: 'p' });
    const other = await store.createKey({ accountId: 'acct_s', plan: 'p' });
    // A client of its own, to take away; the store reads through it.
    const client = new Redis(shared.server.url, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
    await client.connect();
    const staleMs = 60_000;
    // No subscription: this instance misses the revocation's message (an instance cut off from
    // Redis would), so only the stale bound protects it.
    const away = new RedisKeyStore({ redis: client, keyPrefix: 'stale', cacheTtlMs: 1000, maxStaleMs: staleMs, subscribe: false });
    const t0 = Date.now();
    const now = vi.spyOn(Date, 'now').mockReturnValue(t0);
    expect((await away.findByHash(hashApiKey(key)))?.key.id).toBe(record.id);
    await store.revokeKey(record.id);
    client.disconnect();
    // Within the cache TTL: from memory without asking Redis.
    now.mockReturnValue(t0 + 500);
    expect((await away.findByHash(hashApiKey(key)))?.key.id).toBe(record.id);
    // Past the TTL, Redis away: still served, up to maxStaleMs after it was last read.
    now.mockReturnValue(t0 + staleMs - 1);
    expect((await away.findByHash(hashApiKey(key)))?.key.id).toBe(record.id);
    now.mockReturnValue(t0 + staleMs);
    await expect(away.findByHash(hashApiKey(key))).rejects.toThrow();
    // A key never seen is not served from anywhere.
    await expect(away.findByHash(hashApiKey(other.key))).rejects.toThrow();
  });

  it('maxStaleMs 0 fails every lookup at once while Redis is away', async () => {
    const store = new RedisKeyStore({ redis: shared.redis, keyPrefix: 'stale0' });
    const { key } = await store.createKey({ accountId: 'acct_z', plan: 'p' });
    const client = new Redis(shared.server.url, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
    await client.connect();
    const away = new RedisKeyStore({ redis: client, keyPrefix: 'stale0', cacheTtlMs: 0, maxStaleMs: 0, subscribe: false });
    expect(await away.findByHash(hashApiKey(key))).toBeDefined();
    client.disconnect();
    await expect(away.findByHash(hashApiKey(key))).rejects.toThrow();
  });
});

describe('authenticate', () => {
  async function storeWith() {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-auth-unit-'));
    return new FileKeyStore({ file: path.join(dir, 'keys.json'), reloadIntervalMs: 0 });
  }
  const codeOf = (promise: Promise<unknown>) =>
    promise.then(
      () => 'ok',
      (error: unknown) => (error instanceof ApiError ? `${error.status} ${error.code}` : String(error)),
    );

  it('401s for missing, unknown, revoked and expired keys (with WWW-Authenticate); 403s for suspended accounts and restrictions', async () => {
    const store = await storeWith();
    const good = await store.createKey({ accountId: 'a', plan: 'p' });
    const expiring = await store.createKey({ accountId: 'a', plan: 'p', expiresAt: new Date('2030-01-01T00:00:00Z') });
    const ipLocked = await store.createKey({ accountId: 'a', plan: 'p', allowedIps: ['10.0.0.0/8'] });
    const originLocked = await store.createKey({ accountId: 'a', plan: 'p', allowedOrigins: ['https://shop.example'] });
    const req = (key: string, extra: { clientIp?: string; origin?: string } = {}) => ({
      headers: { 'x-api-key': key, ...(extra.origin ? { origin: extra.origin } : {}) },
      url: '/v1/remove-bg',
      clientIp: extra.clientIp,
    });
    expect(await codeOf(authenticate(req(good.key), store))).toBe('ok');
    expect(await codeOf(authenticate({ headers: {}, url: '/' }, store))).toBe('401 missing_api_key');
    // Well formed (its checksum holds) but never issued by this store.
    expect(await codeOf(authenticate(req(generateApiKey()), store))).toBe('401 invalid_api_key');
    const unknown = await authenticate(req(good.key.slice(0, -1) + (good.key.endsWith('A') ? 'B' : 'A')), store).catch((e: ApiError) => e);
    expect(unknown).toBeInstanceOf(ApiError);
    expect((unknown as ApiError).headers['www-authenticate']).toBe('ApiKey realm="bgcut", header="X-API-KEY"');
    // Expiry: at the instant it is expired, a millisecond before it is not.
    expect(await codeOf(authenticate(req(expiring.key), store, undefined, new Date('2029-12-31T23:59:59.999Z')))).toBe('ok');
    expect(await codeOf(authenticate(req(expiring.key), store, undefined, new Date('2030-01-01T00:00:00Z')))).toBe('401 expired_api_key');
    await store.revokeKey(good.record.id);
    expect(await codeOf(authenticate(req(good.key), store))).toBe('401 revoked_api_key');
    expect(await codeOf(authenticate(req(ipLocked.key, { clientIp: '10.2.3.4' }), store))).toBe('ok');
    expect(await codeOf(authenticate(req(ipLocked.key, { clientIp: '::ffff:10.2.3.4' }), store))).toBe('ok');
    expect(await codeOf(authenticate(req(ipLocked.key, { clientIp: '11.2.3.4' }), store))).toBe('403 ip_not_allowed');
    expect(await codeOf(authenticate(req(ipLocked.key), store))).toBe('403 ip_not_allowed');
    expect(await codeOf(authenticate(req(originLocked.key, { origin: 'https://shop.example' }), store))).toBe('ok');
    expect(await codeOf(authenticate(req(originLocked.key, { origin: 'https://evil.example' }), store))).toBe('403 origin_not_allowed');
    expect(await codeOf(authenticate(req(originLocked.key), store))).toBe('403 origin_not_allowed');
    // The 403s say which restriction refused the request.
    expect(await authenticate(req(ipLocked.key, { clientIp: '11.2.3.4' }), store).catch((e: ApiError) => e.message)).toBe('This API key may not be used from this address.');
    expect(await authenticate(req(originLocked.key, { origin: 'https://evil.example' }), store).catch((e: ApiError) => e.message)).toBe('This API key may not be used from this origin.');
    // Identified before the 403: the caller hears of it.
    await store.setAccountStatus('a', 'suspended');
    const heard: string[] = [];
    expect(await codeOf(authenticate(req(ipLocked.key, { clientIp: '10.2.3.4' }), store, (id) => heard.push(id.account.id)))).toBe('403 account_suspended');
    expect(heard).toEqual(['a']);
  });

  it('a store that cannot answer is 503 service_unavailable with Retry-After 5, never a 401', async () => {
    const store = await storeWith();
    const { key } = await store.createKey({ accountId: 'a', plan: 'p' });
    store.findByHash = () => Promise.reject(new Error('down'));
    const error = await authenticate({ headers: { 'x-api-key': key }, url: '/' }, store).catch((e: ApiError) => e);
    expect(error).toMatchObject({ code: 'service_unavailable', status: 503, headers: { 'retry-after': '5' }, message: 'The key store cannot be reached.' });
  });

  it('a stored allow-list entry that is not an address or range: 500 api_key_misconfigured naming the key and entry in its cause, not a 403', async () => {
    const store = await storeWith();
    const { key, record } = await store.createKey({ accountId: 'a', plan: 'p' });
    // As if written by hand or before entries were validated.
    const lookup = await store.findByHash(hashApiKey(key));
    const handWritten = { findByHash: async () => ({ account: lookup!.account, key: { ...record, allowedIps: ['10.0.0.0/33'] } }) };
    const error = await authenticate({ headers: { 'x-api-key': key }, url: '/', clientIp: '10.0.0.1' }, handWritten).catch((e: ApiError) => e);
    expect(error).toMatchObject({ status: 500, code: 'api_key_misconfigured', message: "This API key's IP allow-list is not valid; replace the key." });
    expect(String((error.cause as Error).message)).toBe(`key ${record.id}: allowedIps entry "10.0.0.0/33" is not an IP address or CIDR range (like 192.0.2.7, 10.0.0.0/8, 2001:db8::/32)`);
  });
});

describe('key records', () => {
  it('a label is kept to its first 100 characters (CreateKeyOptions.label)', async () => {
    const store = new FileKeyStore({ file: path.join(await mkdtemp(path.join(os.tmpdir(), 'bgcut-auth-label-')), 'keys.json'), reloadIntervalMs: 0 });
    const { record } = await store.createKey({ accountId: 'a', plan: 'p', label: 'x'.repeat(150) });
    expect(record.label).toBe('x'.repeat(100));
    expect((await store.createKey({ accountId: 'a', plan: 'p', label: 'ci' })).record.label).toBe('ci');
  });
});

describe('key store errors', () => {
  it('name themselves and say what to do', () => {
    const replaced = new KeyAlreadyReplacedError('key_old', 'key_new');
    expect([replaced.name, replaced.message, replaced.keyId, replaced.successorId]).toEqual([
      'KeyAlreadyReplacedError',
      'key key_old is already being replaced by key_new: rotate key_new instead',
      'key_old',
      'key_new',
    ]);
    expect(new NotFoundError('no key k').name).toBe('NotFoundError');
    expect(new TooManyKeysError(3)).toMatchObject({ name: 'TooManyKeysError', maxActiveKeys: 3, message: 'An account may have at most 3 active keys: revoke one first.' });
  });
});

describe('FileKeyStore: a key with an expiry counts against the ceiling until it expires', () => {
  it('a key expiring later counts; one whose expiry is this very millisecond does not', async () => {
    // Only Date is frozen (the file lock's own timers run): "now" is the same for every key made here.
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      vi.setSystemTime(new Date('2026-06-01T12:00:00.000Z'));
      const now = new Date();
      const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-auth-unit-'));
      const store = new FileKeyStore({ file: path.join(dir, 'keys.json'), reloadIntervalMs: 0 });
      await store.createKey({ accountId: 'acct_later', plan: 'p', expiresAt: new Date(now.getTime() + 1000) });
      await expect(store.createKey({ accountId: 'acct_later', plan: 'p', maxActiveKeys: 1 })).rejects.toBeInstanceOf(TooManyKeysError);
      await store.createKey({ accountId: 'acct_now', plan: 'p', expiresAt: now });
      expect((await store.createKey({ accountId: 'acct_now', plan: 'p', maxActiveKeys: 1 })).record.accountId).toBe('acct_now');
    } finally {
      vi.useRealTimers();
    }
  });
});

describe('FileKeyStore: a missing file, a foreign file, and the refusals', () => {
  const fileIn = async () => path.join(await mkdtemp(path.join(os.tmpdir(), 'bgcut-auth-unit-')), 'keys.json');

  it('a key file that does not exist yet is an empty store: no key found, no accounts, nothing thrown', async () => {
    const store = new FileKeyStore({ file: await fileIn(), reloadIntervalMs: 0 });
    expect(await store.findByHash(hashApiKey(generateApiKey()))).toBeUndefined();
    expect(await store.listAccounts()).toEqual([]);
    expect(await store.listKeys('acct_a')).toEqual([]);
    // Once it exists, the same store finds what is written to it.
    const { key } = await store.createKey({ accountId: 'acct_a', plan: 'p' });
    expect((await store.findByHash(hashApiKey(key)))?.account.id).toBe('acct_a');
  });

  it('readData is the whole file as written', async () => {
    const file = await fileIn();
    const store = new FileKeyStore({ file, reloadIntervalMs: 0 });
    const { record } = await store.createKey({ accountId: 'acct_a', plan: 'p' });
    expect(await store.readData()).toEqual(JSON.parse(await readFile(file, 'utf8')));
    expect((await store.readData()).keys.map((k) => k.id)).toEqual([record.id]);
  });

  it('a file that is not a version 1 key file is refused by name, and left as it was', async () => {
    const file = await fileIn();
    for (const text of ['{"version":2,"accounts":[],"keys":[]}', '{"version":1,"accounts":{},"keys":[]}', '{"version":1,"accounts":[]}']) {
      await writeFile(file, text);
      const store = new FileKeyStore({ file, reloadIntervalMs: 0 });
      await expect(store.listAccounts()).rejects.toThrow(`${file} is not a version 1 key file`);
      await expect(store.createKey({ accountId: 'acct_a', plan: 'p' })).rejects.toThrow(`${file} is not a version 1 key file`);
      expect(await readFile(file, 'utf8')).toBe(text);
    }
  });

  it('an unknown key or account is NotFoundError naming it; a revoked key cannot be rotated', async () => {
    const store = new FileKeyStore({ file: await fileIn(), reloadIntervalMs: 0 });
    const { record } = await store.createKey({ accountId: 'acct_a', plan: 'p' });
    await expectNotFoundNamingIt(store);
    expect(await store.setAccountStatus('acct_a', 'suspended')).toMatchObject({ id: 'acct_a', status: 'suspended' });
    const revoked = await store.revokeKey(record.id);
    expect(revoked).toMatchObject({ id: record.id, revokedAt: expect.any(String) });
    // Revoking again keeps the first time.
    expect((await store.revokeKey(record.id)).revokedAt).toBe(revoked.revokedAt);
    await expect(store.rotateKey(record.id, 1000)).rejects.toThrow(`key ${record.id} is revoked`);
    expect(await store.listKeys('acct_a')).toHaveLength(1);
  });
});

describe('RedisKeyStore: the refusals, revokeOthers, and its subscription', () => {
  const shared = useRedis();

  it('an unknown key or account is NotFoundError naming it; a revoked key cannot be rotated; a rotated one names its successor', async () => {
    const store = new RedisKeyStore({ redis: shared.redis, keyPrefix: 'refusals' });
    await expectNotFoundNamingIt(store);
    const { record } = await store.createKey({ accountId: 'acct_r', plan: 'p' });
    const rotated = await store.rotateKey(record.id, 1000);
    await expect(store.rotateKey(record.id, 1000)).rejects.toEqual(new KeyAlreadyReplacedError(record.id, rotated.record.id));
    const revoked = await store.revokeKey(rotated.record.id);
    // Revoking again keeps the first time.
    expect((await store.revokeKey(rotated.record.id)).revokedAt).toBe(revoked.revokedAt);
    await expect(store.rotateKey(rotated.record.id, 1000)).rejects.toThrow(`key ${rotated.record.id} is revoked`);
    expect(await store.listKeys('acct_r')).toHaveLength(2);
  });

  it('revokeOthers revokes the account\'s other keys (not other accounts\') and is not refused by the ceiling', async () => {
    const store = new RedisKeyStore({ redis: shared.redis, keyPrefix: 'others' });
    const first = await store.createKey({ accountId: 'acct_o', plan: 'p' });
    const second = await store.createKey({ accountId: 'acct_o', plan: 'p' });
    const elsewhere = await store.createKey({ accountId: 'acct_x', plan: 'p' });
    await expect(store.createKey({ accountId: 'acct_o', plan: 'p', maxActiveKeys: 2 })).rejects.toBeInstanceOf(TooManyKeysError);
    const fresh = await store.createKey({ accountId: 'acct_o', plan: 'p', maxActiveKeys: 2, revokeOthers: true });
    const keys = await store.listKeys('acct_o');
    expect(keys.filter((k) => !k.revokedAt).map((k) => k.id)).toEqual([fresh.record.id]);
    expect(keys.filter((k) => k.revokedAt).map((k) => k.id).sort()).toEqual([first.record.id, second.record.id].sort());
    expect(await store.findByHash(hashApiKey(first.key))).toMatchObject({ key: { revokedAt: expect.any(String) } });
    expect((await store.listKeys('acct_x'))[0]).toMatchObject({ id: elsewhere.record.id });
    expect((await store.listKeys('acct_x'))[0]!.revokedAt).toBeNull();
  });

  it('listening() subscribes: a revocation made through another instance reaches this one\'s cache; close() ends the subscription', async () => {
    const here = new RedisKeyStore({ redis: shared.redis, keyPrefix: 'listen', cacheTtlMs: 60_000 });
    const there = new RedisKeyStore({ redis: shared.redis, keyPrefix: 'listen', subscribe: false });
    const { key, record } = await there.createKey({ accountId: 'acct_l', plan: 'p' });
    const clients = async () => String(await shared.redis.client('LIST')).trim().split('\n').length;
    const before = await clients();
    await here.listening();
    expect(await clients()).toBe(before + 1);
    expect((await here.findByHash(hashApiKey(key)))?.key.revokedAt).toBeNull();
    await there.revokeKey(record.id);
    // Cached for a minute, yet the message drops it: the next lookup reads the revocation.
    await vi.waitFor(async () => expect((await here.findByHash(hashApiKey(key)))?.key.revokedAt).toEqual(expect.any(String)), { timeout: 10_000, interval: 20 });
    await here.close();
    await vi.waitFor(async () => expect(await clients()).toBe(before), { timeout: 10_000, interval: 20 });
    // A store that never subscribed closes too.
    await there.close();
  });
});
