import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { MAX_ACTIVE_KEYS } from '../../src/dashboard/index.js';
import { HOLDER, OTHER, startDashboardApp, type DashboardApp } from '../helpers/dashboard-app.js';
import { DirectClient } from '../helpers/dashboard-direct.js';

// The dashboard's key actions (src/dashboard/handlers/keys.ts) through `dashboard.handle`, as an
// adapter calls it: every answer the routes give, and what each leaves in the key store. The
// browser-level flows (HTTP, the example apps, a key then used on the API) are in
// test/dashboard.test.ts.

const HOUR = 3_600_000;
const newKeyOf = (html: string) => /id="new-key" class="secret" readonly value="(bgk_[0-9A-Za-z]+)"/.exec(html)?.[1];

describe('the dashboard\'s key actions', () => {
  let app: DashboardApp;
  let client: DirectClient;
  let token: string;
  /** What keyStore.rotateKey does first, to stand in for another request racing this one. */
  let beforeRotate: ((keyId: string) => Promise<void>) | undefined;

  beforeAll(async () => {
    app = await startDashboardApp();
    // The handlers' store is this FileKeyStore, with a hook before each rotation.
    const rotateKey = app.keyStore.rotateKey.bind(app.keyStore);
    app.keyStore.rotateKey = async (keyId: string, overlapMs: number) => {
      await beforeRotate?.(keyId);
      return rotateKey(keyId, overlapMs);
    };
  });
  afterAll(async () => {
    await app?.close();
  });
  beforeEach(async () => {
    beforeRotate = undefined;
    // Each test starts with no keys (the accounts stay).
    await app.keyStore.update((data) => {
      data.keys = [];
    });
    client = new DirectClient(app.dashboard);
    expect((await client.signIn(HOLDER.email, HOLDER.password)).status).toBe(303);
    token = DirectClient.token((await client.request('GET', '/dashboard/keys')).text);
  });

  const keys = () => app.keyStore.listKeys(HOLDER.accountId);
  async function create(label: string, extra: Record<string, string> = {}) {
    const posted = await client.request('POST', '/dashboard/keys', { _csrf: token, label, ...extra });
    expect(posted.status).toBe(303);
    expect(posted.headers.location).toBe('/dashboard/keys/new');
    const shown = await client.request('GET', '/dashboard/keys/new');
    expect(shown.status).toBe(200);
    const id = (await keys()).find((k) => k.label === label)!.id;
    return { key: newKeyOf(shown.text)!, id, page: shown.text };
  }

  it('the dashboard root sends the holder to the key list', async () => {
    const root = await client.request('GET', '/dashboard/');
    expect(root.status).toBe(303);
    expect(root.headers.location).toBe('/dashboard/keys');
  });

  it('lists the account\'s keys newest first, with when each was last used', async () => {
    const older = await create('older one');
    const newer = await create('newer one');
    // Created in that order but within one millisecond, possibly: set the times apart.
    await app.keyStore.update((data) => {
      for (const k of data.keys) {
        if (k.id === older.id) k.createdAt = '2026-01-01T10:00:00.000Z';
        if (k.id === newer.id) k.createdAt = '2026-02-01T10:00:00.000Z';
      }
    });
    app.activity.record(HOLDER.accountId, older.id, new Date('2026-03-04T05:06:00Z'));
    await app.activity.flush();
    const page = (await client.request('GET', '/dashboard/keys')).text;
    expect(page.indexOf('newer one')).toBeGreaterThan(-1);
    expect(page.indexOf('newer one')).toBeLessThan(page.indexOf('older one'));
    const olderRow = page.slice(page.indexOf('older one'));
    expect(olderRow.slice(0, olderRow.indexOf('</tr>'))).toContain('2026-03-04 05:06 UTC');
    const newerRow = page.slice(page.indexOf('newer one'));
    expect(newerRow.slice(0, newerRow.indexOf('</tr>'))).toMatch(/data-label="Last used">Never</);
  });

  it('a refused form answers 400 with the reason and the form as it was sent, and creates nothing', async () => {
    const refused = await client.request('POST', '/dashboard/keys', { _csrf: token, label: 'kept label', expires: 'soon' });
    expect(refused.status).toBe(400);
    expect(refused.text).toContain('Pick an expiry from the list.');
    expect(refused.text).toContain('value="kept label"');
    expect(await keys()).toEqual([]);
  });

  it(`at ${MAX_ACTIVE_KEYS} active keys a create answers 400 with the ceiling's reason and the form; a revoked key frees a place`, async () => {
    const { record } = await app.keyStore.createKey({ accountId: HOLDER.accountId, plan: 'roomy', label: 'seed' });
    await app.keyStore.update((data) => {
      const seed = data.keys.find((k) => k.id === record.id)!;
      for (let i = 1; i < MAX_ACTIVE_KEYS; i++) data.keys.push({ ...seed, id: `${seed.id}x${i}`, hash: `${seed.hash.slice(0, -4)}${String(i).padStart(4, '0')}` });
    });
    const refused = await client.request('POST', '/dashboard/keys', { _csrf: token, label: 'one too many' });
    expect(refused.status).toBe(400);
    expect(refused.text).toContain(`An account may have at most ${MAX_ACTIVE_KEYS} active keys: revoke one first.`);
    expect(refused.text).toContain('value="one too many"');
    expect(await keys()).toHaveLength(MAX_ACTIVE_KEYS);
    await app.keyStore.revokeKey(record.id);
    expect((await create('one more')).key).toMatch(/^bgk_/);
  });

  it('the new-key page shows a key once; without one to show it sends the holder to the list with a notice', async () => {
    const { key, page } = await create('shown once');
    expect(key).toMatch(/^bgk_/);
    expect(page).toContain('http://dash.example/v1/remove-bg');
    const again = await client.request('GET', '/dashboard/keys/new');
    expect(again.status).toBe(303);
    expect(again.headers.location).toBe('/dashboard/keys?notice=key-shown');
    expect((await client.request('GET', '/dashboard/keys?notice=key-shown')).text).toContain('That new key was shown once already');
    expect((await client.request('GET', '/dashboard/keys?notice=nonsense')).text).not.toContain('class="notice');
  });

  it('revoking: the confirmation page, then the key revoked and a notice; a revoked or unknown key is 404 either way', async () => {
    const { id } = await create('to revoke');
    const confirm = await client.request('GET', `/dashboard/keys/${id}/revoke`);
    expect(confirm.status).toBe(200);
    expect(confirm.text).toContain(id);
    const revoked = await client.request('POST', `/dashboard/keys/${id}/revoke`, { _csrf: token });
    expect(revoked.status).toBe(303);
    expect(revoked.headers.location).toBe('/dashboard/keys?notice=revoked');
    expect((await keys()).find((k) => k.id === id)!.revokedAt).toEqual(expect.any(String));
    for (const path of [`/dashboard/keys/${id}/revoke`, '/dashboard/keys/key_unknown/revoke']) {
      const page = await client.request('GET', path);
      expect(page.status).toBe(404);
      expect(page.text).toContain('This account has no such key, or it is revoked already.');
      const post = await client.request('POST', path, { _csrf: token });
      expect(post.status).toBe(404);
      expect(post.text).toContain('This account has no such active key.');
    }
  });

  it('an expired key cannot be revoked or rotated (404); its confirmation page still opens', async () => {
    const { id } = await create('expired');
    await app.keyStore.update((data) => {
      data.keys.find((k) => k.id === id)!.expiresAt = new Date(Date.now() - 1000).toISOString();
    });
    expect((await client.request('GET', `/dashboard/keys/${id}/revoke`)).status).toBe(200);
    expect((await client.request('POST', `/dashboard/keys/${id}/revoke`, { _csrf: token })).status).toBe(404);
    expect((await client.request('POST', `/dashboard/keys/${id}/rotate`, { _csrf: token, overlap: '1h' })).status).toBe(404);
    expect((await keys()).find((k) => k.id === id)!.revokedAt).toBeFalsy();
  });

  it('rotates with each overlap on offer: the old key then ends that long from now', async () => {
    for (const [overlap, ms] of [['1h', HOUR], ['24h', 24 * HOUR], ['7d', 7 * 24 * HOUR]] as const) {
      const { id } = await create(`rotate ${overlap}`);
      const before = Date.now();
      const posted = await client.request('POST', `/dashboard/keys/${id}/rotate`, { _csrf: token, overlap });
      expect(posted.status).toBe(303);
      expect(posted.headers.location).toBe('/dashboard/keys/new');
      const shown = await client.request('GET', '/dashboard/keys/new');
      expect(newKeyOf(shown.text)).toMatch(/^bgk_/);
      const old = (await keys()).find((k) => k.id === id)!;
      expect(Date.parse(old.expiresAt!)).toBeGreaterThanOrEqual(before + ms);
      expect(Date.parse(old.expiresAt!)).toBeLessThanOrEqual(Date.now() + ms);
    }
  });

  it('a rotation without an overlap from the list answers 400 and changes nothing', async () => {
    const { id } = await create('no overlap');
    for (const form of [{ _csrf: token }, { _csrf: token, overlap: '2h' }]) {
      const refused = await client.request('POST', `/dashboard/keys/${id}/rotate`, form);
      expect(refused.status).toBe(400);
      expect(refused.text).toContain('Pick how long the old key keeps working.');
    }
    expect(await keys()).toHaveLength(1);
    expect((await keys())[0]!.replacedBy).toBeUndefined();
  });

  it('a key rotated before answers 409 naming its successor, and no third key is made', async () => {
    const { id } = await create('rotated twice');
    expect((await client.request('POST', `/dashboard/keys/${id}/rotate`, { _csrf: token, overlap: '1h' })).status).toBe(303);
    const successor = (await keys()).find((k) => k.id === id)!.replacedBy!;
    expect(successor).toEqual(expect.any(String));
    const again = await client.request('POST', `/dashboard/keys/${id}/rotate`, { _csrf: token, overlap: '1h' });
    expect(again.status).toBe(409);
    expect(again.text).toContain(`The key ${id} is already being replaced by ${successor}`);
    expect(await keys()).toHaveLength(2);
  });

  it('a rotation that loses a race to another one answers 409 naming the winner\'s key', async () => {
    const { id } = await create('raced');
    let winner = '';
    beforeRotate = async (keyId) => {
      beforeRotate = undefined;
      // The other request's rotation (the hook is cleared first: this one goes straight to the store).
      winner = (await app.keyStore.rotateKey(keyId, HOUR)).record.id;
    };
    const lost = await client.request('POST', `/dashboard/keys/${id}/rotate`, { _csrf: token, overlap: '1h' });
    expect(lost.status).toBe(409);
    expect(lost.text).toContain(`The key ${id} is already being replaced by ${winner}`);
    expect(await keys()).toHaveLength(2);
  });

  it('a key removed between the page and the rotation answers 404', async () => {
    const { id } = await create('removed');
    beforeRotate = async (keyId) => {
      await app.keyStore.update((data) => {
        data.keys = data.keys.filter((k) => k.id !== keyId);
      });
    };
    const gone = await client.request('POST', `/dashboard/keys/${id}/rotate`, { _csrf: token, overlap: '1h' });
    expect(gone.status).toBe(404);
    expect(gone.text).toContain('This account has no such active key.');
  });

  it('another account\'s key is 404 to every action, and stays as it was', async () => {
    const { record } = await app.keyStore.createKey({ accountId: OTHER.accountId, plan: 'roomy', label: 'bob\'s' });
    expect((await client.request('GET', `/dashboard/keys/${record.id}/revoke`)).status).toBe(404);
    expect((await client.request('POST', `/dashboard/keys/${record.id}/revoke`, { _csrf: token })).status).toBe(404);
    expect((await client.request('POST', `/dashboard/keys/${record.id}/rotate`, { _csrf: token, overlap: '1h' })).status).toBe(404);
    const [kept] = await app.keyStore.listKeys(OTHER.accountId);
    expect(kept).toMatchObject({ id: record.id });
    expect(kept!.revokedAt).toBeFalsy();
    expect(kept!.replacedBy).toBeFalsy();
  });
});
