import { mkdtemp, readFile, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { main as keysCli } from '../src/cli/keys.js';
import { ActivityRecorder, FileKeyStore, lastDays, RedisKeyStore, type ActivityBatch, type ActivityStore, type KeyAdmin } from '../src/core/index.js';
import { FileDashboardStore, RedisDashboardStore, verifyPassword, type DashboardStore } from '../src/dashboard/index.js';
import { RedisUsageMeter } from '../src/core/limits/usage-meter.js';
import { redisTopologies, useRedisTopology } from './helpers/redis-topologies.js';

/** The same behaviour from both stores: the file one (inside the key file) and the Redis one. */
function storeContract(name: string, make: () => Promise<{ keys: KeyAdmin; store: DashboardStore }>) {
  describe(name, () => {
    it('keeps holders with unique emails, sessions by hash, and signs an account out everywhere but one session', async () => {
      const { keys, store } = await make();
      await keys.createKey({ accountId: 'a1', plan: 'free' });
      await keys.createKey({ accountId: 'a2', plan: 'free' });
      expect(await store.findAccount('a1')).toMatchObject({ id: 'a1', plan: 'free', status: 'active' });
      expect(await store.findAccount('nobody')).toBeUndefined();
      const holder = { email: 'x@example.com', accountId: 'a1', passwordHash: 'scrypt$1$1$1$AA$AA', updatedAt: new Date().toISOString() };
      await store.setHolder(holder);
      expect(await store.findHolder('x@example.com')).toEqual(holder);
      await expect(store.setHolder({ ...holder, accountId: 'a2' })).rejects.toThrow('already signs in');
      const later = new Date(Date.now() + 3_600_000).toISOString();
      const session = (csrfToken: string) => ({ accountId: 'a1', email: 'x@example.com', csrfToken, createdAt: new Date().toISOString(), expiresAt: later });
      await store.createSession('h1', session('t1'));
      await store.createSession('h2', session('t2'));
      await store.createSession('h3', { ...session('t3'), accountId: 'a2' });
      expect((await store.findSession('h2'))?.csrfToken).toBe('t2');
      expect(await store.findSession('constructor')).toBeUndefined();
      await store.deleteSessionsOf('a1', 'h1');
      expect(await store.findSession('h1')).toBeDefined();
      expect(await store.findSession('h2')).toBeUndefined();
      expect(await store.findSession('h3')).toBeDefined();
      await store.deleteSession('h1');
      expect(await store.findSession('h1')).toBeUndefined();
    });

    it('adds activity batches: per-day counts add up, last use keeps the latest time', async () => {
      const { store } = await make();
      const [yesterday, today] = lastDays(2);
      await store.addActivity({ daily: [{ accountId: 'a1', day: today!, count: 3 }, { accountId: 'a1', day: yesterday!, count: 1 }], lastUsed: [{ keyId: 'key_1', at: '2026-01-02T00:00:00.000Z' }] });
      await store.addActivity({ daily: [{ accountId: 'a1', day: today!, count: 2 }], lastUsed: [{ keyId: 'key_1', at: '2026-01-01T00:00:00.000Z' }, { keyId: 'key_2', at: '2026-01-03T00:00:00.000Z' }] });
      expect(await store.dailyCounts('a1', [yesterday!, today!])).toEqual([1, 5]);
      expect(await store.dailyCounts('a2', [today!])).toEqual([0]);
      expect(await store.lastUsed(['key_1', 'key_2', 'key_3'])).toEqual({ key_1: '2026-01-02T00:00:00.000Z', key_2: '2026-01-03T00:00:00.000Z' });
    });
  });
}

storeContract('FileDashboardStore', async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-dash-store-'));
  const keys = new FileKeyStore({ file: path.join(dir, 'keys.json'), reloadIntervalMs: 0 });
  return { keys, store: new FileDashboardStore(keys) };
});

describe('FileDashboardStore files', () => {
  async function make() {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-dash-files-'));
    const keys = new FileKeyStore({ file: path.join(dir, 'keys.json'), reloadIntervalMs: 0 });
    return { dir, keys, store: new FileDashboardStore(keys) };
  }
  const later = () => new Date(Date.now() + 3_600_000).toISOString();

  it('sign-ins, sign-outs and activity flushes leave the key file untouched: they go to a file of their own', async () => {
    const { dir, keys, store } = await make();
    await keys.createKey({ accountId: 'a1', plan: 'free' });
    await store.setHolder({ email: 'x@example.com', accountId: 'a1', passwordHash: 'scrypt$1$1$1$AA$AA', updatedAt: new Date().toISOString() });
    const before = { text: await readFile(keys.file, 'utf8'), mtimeMs: (await stat(keys.file)).mtimeMs };
    await new Promise((resolve) => setTimeout(resolve, 20)); // an mtime tick apart
    await store.createSession('h1', { accountId: 'a1', email: 'x@example.com', csrfToken: 't', createdAt: new Date().toISOString(), expiresAt: later() });
    const today = lastDays(1)[0]!; // once: a test that spans midnight still asks about the day it wrote
    await store.addActivity({ daily: [{ accountId: 'a1', day: today, count: 4 }], lastUsed: [{ keyId: 'key_1', at: new Date().toISOString() }] });
    await store.deleteSession('h1');
    expect({ text: await readFile(keys.file, 'utf8'), mtimeMs: (await stat(keys.file)).mtimeMs }).toEqual(before);
    expect(store.file).toBe(path.join(dir, 'keys.dashboard.json'));
    expect(JSON.parse(await readFile(store.file, 'utf8')).activity.daily.a1).toEqual({ [today]: 4 });
    expect(await store.dailyCounts('a1', [today])).toEqual([4]);
  });

  it('reads sessions and activity an older version left in the key file, and moves them out on its first write', async () => {
    const { keys, store } = await make();
    await keys.createKey({ accountId: 'a1', plan: 'free' });
    const data = JSON.parse(await readFile(keys.file, 'utf8'));
    const today = lastDays(1)[0]!;
    data.sessions = { old: { accountId: 'a1', email: 'x@example.com', csrfToken: 't', createdAt: new Date().toISOString(), expiresAt: later() } };
    data.activity = { daily: { a1: { [today]: 7 } }, lastUsed: { key_1: '2026-01-01T00:00:00.000Z' } };
    await writeFile(keys.file, JSON.stringify(data));
    expect((await store.findSession('old'))?.csrfToken).toBe('t');
    expect(await store.dailyCounts('a1', [today])).toEqual([7]);
    await store.addActivity({ daily: [{ accountId: 'a1', day: today, count: 1 }], lastUsed: [] });
    expect(await store.dailyCounts('a1', [today])).toEqual([8]);
    expect((await store.findSession('old'))?.csrfToken).toBe('t');
    expect(await store.lastUsed(['key_1'])).toEqual({ key_1: '2026-01-01T00:00:00.000Z' });
    const keyFile = JSON.parse(await readFile(keys.file, 'utf8'));
    expect([keyFile.sessions, keyFile.activity, keyFile.keys.length]).toEqual([undefined, undefined, 1]);
  });
});

describe.each(redisTopologies)('on $name', (topology) => {
  const shared = useRedisTopology(topology);
  let n = 0;
  storeContract('RedisDashboardStore', async () => {
    const keyPrefix = `t${n++}`;
    return { keys: new RedisKeyStore({ redis: shared.redis, keyPrefix, cacheTtlMs: 0 }), store: new RedisDashboardStore({ redis: shared.redis, keyPrefix }) };
  });

  it('two instances setting one email for two accounts at once: one wins, the other is refused', async () => {
    const keyPrefix = `race${n++}`;
    // Two clients, as two API instances would have.
    const stores = [new RedisDashboardStore({ redis: shared.redis, keyPrefix }), new RedisDashboardStore({ redis: await shared.connect(), keyPrefix })];
    for (let i = 0; i < 20; i++) {
      const email = `race${i}@example.com`;
      const holder = (accountId: string) => ({ email, accountId, passwordHash: 'scrypt$1$1$1$AA$AA', updatedAt: new Date().toISOString() });
      const outcomes = await Promise.allSettled([stores[0]!.setHolder(holder(`a${i}`)), stores[1]!.setHolder(holder(`b${i}`))]);
      const won = outcomes.filter((o) => o.status === 'fulfilled');
      expect(won).toHaveLength(1);
      const winner = outcomes[0]!.status === 'fulfilled' ? `a${i}` : `b${i}`;
      expect((await stores[0]!.findHolder(email))?.accountId).toBe(winner);
    }
  });

  it('an activity write that fails for one account is retried for that account alone: nothing counted twice', async () => {
    const keyPrefix = `act${n++}`;
    const store = new RedisDashboardStore({ redis: shared.redis, keyPrefix });
    const recorder = new ActivityRecorder({ store, flushIntervalMs: 3_600_000, onError: () => {} });
    const now = new Date(); // one clock for the records and the day asked about
    const today = lastDays(1, now);
    // acct_bad's counts hash is a string: its write fails (WRONGTYPE), acct_good's goes through.
    const badKey = `${keyPrefix}:{a:acct_bad}:daily`;
    await shared.redis.set(badKey, 'not a hash');
    for (let i = 0; i < 3; i++) recorder.record('acct_good', 'key_g', now);
    for (let i = 0; i < 2; i++) recorder.record('acct_bad', 'key_b', now);
    await recorder.flush();
    expect(await store.dailyCounts('acct_good', today)).toEqual([3]);
    await shared.redis.del(badKey);
    await recorder.flush();
    expect(await store.dailyCounts('acct_good', today)).toEqual([3]);
    expect(await store.dailyCounts('acct_bad', today)).toEqual([2]);
    await recorder.close();
  });

  it('charged cutouts per day, recorded by the usage meter with the month total: apart from requests, once per op, across a month boundary', async () => {
    const keyPrefix = `days${n++}`;
    let now = new Date('2026-10-31T23:59:00Z');
    const meter = new RedisUsageMeter(shared.redis, keyPrefix, () => now);
    const store = new RedisDashboardStore({ redis: shared.redis, keyPrefix });
    await meter.add('acct_d', '2026-10', 1.5, 1, 'op1');
    await meter.add('acct_d', '2026-10', 1.5, 1, 'op1'); // a retried record: counted once
    await meter.add('acct_d', '2026-10', 2, 2, 'op2');
    now = new Date('2026-11-01T00:00:30Z'); // charged in October, recorded just after midnight
    await meter.add('acct_d', '2026-10', 1, 1, 'op3');
    await meter.add('acct_d', '2026-11', 1, 1, 'op4');
    // Requests (refused ones too) are counted apart, by the activity recorder. The store drops the
    // day 36 days back as it writes, by its own clock: that clock reads the test's moment too
    // (run on 6 December 2026, a real clock dropped 31 October).
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(now);
    try {
      await store.addActivity({ daily: [{ accountId: 'acct_d', day: '2026-10-31', count: 5 }], lastUsed: [] });
    } finally {
      vi.useRealTimers();
    }
    const days = ['2026-10-30', '2026-10-31', '2026-11-01'];
    expect(await store.dailyUsage('acct_d', days)).toEqual([
      { images: 0, megapixels: 0 },
      { images: 3, megapixels: 3.5 },
      { images: 2, megapixels: 2 },
    ]);
    expect(await store.dailyCounts('acct_d', days)).toEqual([0, 5, 0]);
    // The month totals are the same records.
    expect((await meter.get('acct_d', '2026-10')).images).toBe(4);
    expect((await meter.get('acct_d', '2026-11')).images).toBe(1);
    expect(await store.dailyUsage('acct_other', days)).toEqual(days.map(() => ({ images: 0, megapixels: 0 })));
  });

  it('a holder who changes email frees the old one', async () => {
    const store = new RedisDashboardStore({ redis: shared.redis, keyPrefix: `move${n++}` });
    const holder = { email: 'old@example.com', accountId: 'm1', passwordHash: 'scrypt$1$1$1$AA$AA', updatedAt: new Date().toISOString() };
    await store.setHolder(holder);
    await store.setHolder({ ...holder, email: 'new@example.com' });
    expect(await store.findHolder('old@example.com')).toBeUndefined();
    expect((await store.findHolder('new@example.com'))?.accountId).toBe('m1');
    await store.setHolder({ ...holder, email: 'old@example.com', accountId: 'm2' });
    expect((await store.findHolder('old@example.com'))?.accountId).toBe('m2');
  });
});

describe('ActivityRecorder', () => {
  /** A store that counts its writes. */
  function countingStore(): ActivityStore & { writes: ActivityBatch[]; fail: boolean } {
    const daily = new Map<string, number>();
    return {
      writes: [],
      fail: false,
      async addActivity(batch) {
        if (this.fail) throw new Error('store down');
        this.writes.push(batch);
        for (const d of batch.daily) daily.set(`${d.accountId}/${d.day}`, (daily.get(`${d.accountId}/${d.day}`) ?? 0) + d.count);
      },
      async dailyCounts(accountId, days) {
        return days.map((day) => daily.get(`${accountId}/${day}`) ?? 0);
      },
      async lastUsed() {
        return {};
      },
    };
  }

  it('writes 1000 requests as one batch, and shows pending counts before they are written', async () => {
    const store = countingStore();
    const recorder = new ActivityRecorder({ store, flushIntervalMs: 3_600_000 });
    const now = new Date(); // one clock for the records and the day asked about
    const today = lastDays(1, now);
    for (let i = 0; i < 1000; i++) recorder.record('acct', i % 2 ? 'key_a' : 'key_b', now);
    expect(store.writes).toHaveLength(0);
    expect(await recorder.dailyCounts('acct', today)).toEqual([1000]);
    expect(Object.keys(await recorder.lastUsed(['key_a', 'key_b', 'key_c'])).sort()).toEqual(['key_a', 'key_b']);
    await recorder.flush();
    expect(store.writes).toHaveLength(1);
    expect(store.writes[0]!.daily).toEqual([{ accountId: 'acct', day: today[0], count: 1000 }]);
    expect(await recorder.dailyCounts('acct', today)).toEqual([1000]);
    await recorder.close();
  });

  /**
   * A shared store in memory whose write waits at `writeGate` and whose reads answer at
   * `readGate` with what was stored when they were sent (or, `late`, when they answer).
   */
  function gatedStore() {
    const daily = new Map<string, number>();
    const lastUsed: Record<string, string> = {};
    let openWrite!: () => void;
    const writeGate = new Promise<void>((resolve) => (openWrite = resolve));
    const store: ActivityStore & { readGate?: Promise<void>; late: boolean } = {
      readGate: undefined,
      late: false,
      async addActivity(batch) {
        await writeGate;
        for (const d of batch.daily) daily.set(`${d.accountId}/${d.day}`, (daily.get(`${d.accountId}/${d.day}`) ?? 0) + d.count);
        for (const u of batch.lastUsed) if (!(lastUsed[u.keyId]! > u.at)) lastUsed[u.keyId] = u.at;
      },
      async dailyCounts(accountId, days) {
        const sent = days.map((day) => daily.get(`${accountId}/${day}`) ?? 0);
        await this.readGate;
        return this.late ? days.map((day) => daily.get(`${accountId}/${day}`) ?? 0) : sent;
      },
      async lastUsed(keyIds) {
        const sent = { ...lastUsed };
        await this.readGate;
        return Object.fromEntries(keyIds.flatMap((id) => ((this.late ? lastUsed : sent)[id] ? [[id, (this.late ? lastUsed : sent)[id]!]] : [])));
      },
    };
    return { store, daily, openWrite };
  }

  it('a read during a write counts the batch in flight once: not lost while it is neither pending nor stored', async () => {
    const at = new Date('2026-11-26T12:00:00Z');
    const { store, daily, openWrite } = gatedStore();
    const recorder = new ActivityRecorder({ store, flushIntervalMs: 3_600_000 });
    for (let i = 0; i < 3; i++) recorder.record('acct', 'key_a', at);
    const writing = recorder.flush(); // held at the gate
    daily.set('acct/2026-11-26', 5); // another instance's batch lands meanwhile
    const counts = recorder.dailyCounts('acct', ['2026-11-26']);
    const used = recorder.lastUsed(['key_a']);
    openWrite();
    await writing;
    expect(await counts).toEqual([8]);
    expect(await used).toEqual({ key_a: at.toISOString() });
    await recorder.close();
  });

  it.each([
    ['as the store was when it was sent (without the batch)', false],
    ['as the store is when it arrives (with the batch)', true],
  ])('a read sent before a write and answered after it started, %s, counts the batch once', async (_, late) => {
    const at = new Date('2026-11-26T12:00:00Z');
    const { store, openWrite } = gatedStore();
    const recorder = new ActivityRecorder({ store, flushIntervalMs: 3_600_000 });
    recorder.record('acct', 'key_a', at);
    recorder.record('acct', 'key_a', at);
    let answer!: () => void;
    store.readGate = new Promise<void>((resolve) => (answer = resolve));
    store.late = late;
    const counts = recorder.dailyCounts('acct', ['2026-11-26']);
    const writing = recorder.flush();
    answer();
    store.readGate = undefined;
    openWrite();
    await writing;
    expect(await counts).toEqual([2]);
    await recorder.close();
  });

  it('keeps a batch whose write failed and writes it with the next one', async () => {
    const store = countingStore();
    const errors: unknown[] = [];
    const recorder = new ActivityRecorder({ store, flushIntervalMs: 3_600_000, onError: (e) => errors.push(e) });
    recorder.record('acct', 'key_a');
    store.fail = true;
    await recorder.flush();
    expect(errors).toHaveLength(1);
    recorder.record('acct', 'key_a');
    store.fail = false;
    await recorder.close();
    expect(store.writes).toHaveLength(1);
    expect(store.writes[0]!.daily[0]!.count).toBe(2);
  });
});

describe('bgcut-keys accounts set-holder', () => {
  it('sets an email and a scrypt-hashed password from the environment, and refuses a short one', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-cli-holder-'));
    const file = path.join(dir, 'keys.json');
    await new FileKeyStore({ file }).createKey({ accountId: 'acme', plan: 'free' });
    const out: string[] = [];
    process.env.BGCUT_HOLDER_PASSWORD = 'a long enough password';
    try {
      expect(await keysCli(['accounts', 'set-holder', 'acme', '--email', 'Ops@Acme.example', '--file', file], (l) => out.push(l))).toBe(0);
      process.env.BGCUT_HOLDER_PASSWORD = 'short';
      expect(await keysCli(['accounts', 'set-holder', 'acme', '--email', 'ops@acme.example', '--file', file], (l) => out.push(l))).toBe(2);
    } finally {
      delete process.env.BGCUT_HOLDER_PASSWORD;
    }
    expect(out[0]).toBe('ops@acme.example can now sign in to the dashboard for acme');
    const text = await readFile(file, 'utf8');
    expect(text).not.toContain('a long enough password');
    const holder = (JSON.parse(text) as { holders: Array<{ email: string; passwordHash: string }> }).holders[0]!;
    expect(holder.email).toBe('ops@acme.example');
    expect(holder.passwordHash).toMatch(/^scrypt\$32768\$8\$3\$/);
    expect(await verifyPassword('a long enough password', holder.passwordHash)).toBe(true);
    expect(await verifyPassword('a long enough passwore', holder.passwordHash)).toBe(false);
  });
});
