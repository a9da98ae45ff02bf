import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dayOf, hashApiKey } from '../src/core/index.js';
import { recordIssuedKeys } from './helpers/log-capture.js';
import { HOLDER, OTHER, startDashboardApp, type DashboardApp } from './helpers/dashboard-app.js';

/** A cookie-keeping client that behaves like a same-origin browser form (Origin header, no redirects followed). */
class Client {
  private cookies = new Map<string, string>();
  constructor(private readonly base: string) {}

  async request(path: string, init: { method?: string; form?: Record<string, string>; headers?: Record<string, string> } = {}) {
    // An empty value leaves the header out (a request from outside a browser).
    const headers: Record<string, string> = Object.fromEntries(Object.entries({ origin: this.base, ...init.headers }).filter(([, v]) => v !== ''));
    if (this.cookies.size) headers.cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    if (init.form) headers['content-type'] = 'application/x-www-form-urlencoded';
    const response = await fetch(`${this.base}${path}`, {
      method: init.method ?? (init.form ? 'POST' : 'GET'),
      headers,
      redirect: 'manual',
      ...(init.form ? { body: new URLSearchParams(init.form).toString() } : {}),
    });
    const setCookie = response.headers.get('set-cookie');
    if (setCookie) {
      const [pair] = setCookie.split(';');
      const [name, value] = pair!.split('=') as [string, string];
      if (value) this.cookies.set(name, value);
      else this.cookies.delete(name);
    }
    const text = await response.text();
    return { status: response.status, headers: response.headers, text, setCookie };
  }

  /** The anti-forgery token the last page put in its forms. */
  static token(html: string): string {
    return /name="csrf-token" content="([^"]+)"/.exec(html)![1]!;
  }

  async signIn(email: string, password: string) {
    const page = await this.request('/dashboard/sign-in');
    return this.request('/dashboard/sign-in', { form: { _csrf: Client.token(page.text), email, password } });
  }
}

const newKeyOf = (html: string) => /id="new-key" class="secret" readonly value="(bgk_[0-9A-Za-z]+)"/.exec(html)?.[1];

/** Post/Redirect/Get: a create or rotate answers 303 to the page that shows the new key once. */
async function shownAfter(client: Client, posted: { status: number; headers: Headers }) {
  expect(posted.status).toBe(303);
  expect(posted.headers.get('location')).toBe('/dashboard/keys/new');
  return client.request('/dashboard/keys/new');
}

describe('dashboard over HTTP (Express)', () => {
  let app: DashboardApp;
  beforeAll(async () => {
    app = await startDashboardApp();
  });
  afterAll(async () => {
    await app?.close();
  });

  it('serves every page with a CSP without inline script, frame-ancestors none, a referrer policy and no-store', async () => {
    const client = new Client(app.url);
    const page = await client.request('/dashboard/sign-in');
    expect(page.status).toBe(200);
    const csp = page.headers.get('content-security-policy')!;
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).toContain("frame-ancestors 'none'");
    expect(page.headers.get('referrer-policy')).toBe('same-origin');
    expect(page.headers.get('cache-control')).toBe('no-store');
    expect(page.text).not.toMatch(/<script>(?!<\/script>)|<script(?![^>]*\bsrc=)[^>]*>/);
    expect(page.text).toContain('<label for="email">');
  });

  it('sends a visitor who is not signed in to the sign-in page, remembering where they were going', async () => {
    const page = await new Client(app.url).request('/dashboard/usage');
    expect(page.status).toBe(303);
    expect(page.headers.get('location')).toBe('/dashboard/sign-in?next=%2Fdashboard%2Fusage');
  });

  it('signs in with a signed HttpOnly SameSite=Strict session cookie, and signs out', async () => {
    const client = new Client(app.url);
    const signedIn = await client.signIn(HOLDER.email, HOLDER.password);
    expect(signedIn.status).toBe(303);
    expect(signedIn.headers.get('location')).toBe('/dashboard/keys');
    expect(signedIn.setCookie).toMatch(/^bgcut_session=[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+; Max-Age=43200; Path=\/dashboard; HttpOnly; SameSite=Strict$/);
    const keys = await client.request('/dashboard/keys');
    expect(keys.status).toBe(200);
    expect(keys.text).toContain(HOLDER.accountId);
    // The store holds only the id's hash, never the cookie's id.
    const raw = (await readFile(app.keyStore.file, 'utf8')) + (await readFile(app.store.file, 'utf8'));
    const id = signedIn.setCookie!.split('=')[1]!.split('.')[0]!;
    expect(raw).toContain(createHash('sha256').update(id).digest('hex'));
    expect(raw).not.toContain(id);

    const out = await client.request('/dashboard/sign-out', { form: { _csrf: Client.token(keys.text) } });
    expect(out.status).toBe(303);
    expect((await client.request('/dashboard/keys')).status).toBe(303);
  });

  it('refuses a tampered session cookie', async () => {
    const client = new Client(app.url);
    const signedIn = await client.signIn(HOLDER.email, HOLDER.password);
    const [name, value] = signedIn.setCookie!.split(';')[0]!.split('=') as [string, string];
    const tampered = await fetch(`${app.url}/dashboard/keys`, { headers: { cookie: `${name}=${value.slice(0, -2)}xx` }, redirect: 'manual' });
    expect(tampered.status).toBe(303);
  });

  it('refuses cross-site posts: a foreign Origin, a cross-site fetch, or a missing token', async () => {
    const client = new Client(app.url);
    await client.signIn(HOLDER.email, HOLDER.password);
    const token = Client.token((await client.request('/dashboard/keys')).text);
    const foreign = await client.request('/dashboard/keys', { form: { _csrf: token, label: 'evil' }, headers: { origin: 'https://evil.example' } });
    expect(foreign.status).toBe(403);
    const crossSite = await client.request('/dashboard/keys', { form: { _csrf: token, label: 'evil' }, headers: { origin: '', 'sec-fetch-site': 'cross-site' } });
    expect(crossSite.status).toBe(403);
    const noToken = await client.request('/dashboard/keys', { form: { label: 'evil' } });
    expect(noToken.status).toBe(403);
    const tryIt = await client.request('/dashboard/try', { method: 'POST', headers: { 'content-type': 'multipart/form-data; boundary=x' } });
    expect(tryIt.status).toBe(403);
    expect(JSON.parse(tryIt.text).code).toBe('cross_site_request');
    expect(await app.keyStore.listKeys(HOLDER.accountId)).toHaveLength(0);
  });

  it('creates a key shown once, with a curl line; the list never shows it again; it works on the API', async () => {
    const client = new Client(app.url);
    await client.signIn(HOLDER.email, HOLDER.password);
    const token = Client.token((await client.request('/dashboard/keys')).text);
    const created = await shownAfter(client, await client.request('/dashboard/keys', { form: { _csrf: token, label: 'server one', expires: '30d', ips: '', origins: '' } }));
    expect(created.status).toBe(200);
    const key = newKeyOf(created.text)!;
    recordIssuedKeys([key]);
    expect(key).toBeDefined();
    expect(created.text).toContain(`curl -H &quot;X-API-KEY: ${key}&quot; -F file=@photo.jpg ${app.url}/v1/remove-bg`);
    expect(created.headers.get('cache-control')).toBe('no-store');
    // Shown once: the same page again (a reload) shows no key and makes none.
    const again = await client.request('/dashboard/keys/new');
    expect(again.status).toBe(303);
    expect(again.headers.get('location')).toBe('/dashboard/keys?notice=key-shown');
    expect(await app.keyStore.listKeys(HOLDER.accountId)).toHaveLength(1);
    const list = await client.request('/dashboard/keys');
    expect(list.text).not.toContain(key);
    expect(list.text).toContain('server one');
    const [record] = await app.keyStore.listKeys(HOLDER.accountId);
    expect(record!.hash).toBe(hashApiKey(key));
    expect(Date.parse(record!.expiresAt!) - Date.now()).toBeGreaterThan(29 * 86_400_000);
    const account = await fetch(`${app.url}/v1/account`, { headers: { 'x-api-key': key } });
    expect(account.status).toBe(200);
  });

  it('checks the create form: bad CIDR and origin entries are refused with the reason, and nothing is created', async () => {
    const client = new Client(app.url);
    await client.signIn(OTHER.email, OTHER.password);
    const token = Client.token((await client.request('/dashboard/keys')).text);
    const badIp = await client.request('/dashboard/keys', { form: { _csrf: token, ips: '10.0.0.0/99' } });
    expect(badIp.status).toBe(400);
    expect(badIp.text).toContain('is not an IP address or CIDR range');
    const badOrigin = await client.request('/dashboard/keys', { form: { _csrf: token, origins: 'https://shop.example/path' } });
    expect(badOrigin.status).toBe(400);
    const good = await shownAfter(client, await client.request('/dashboard/keys', { form: { _csrf: token, ips: '203.0.113.0/24', origins: 'https://shop.example' } }));
    expect(good.status).toBe(200);
    recordIssuedKeys([newKeyOf(good.text)!]);
    const keys = await app.keyStore.listKeys(OTHER.accountId);
    expect(keys).toHaveLength(1);
    expect(keys[0]!.allowedIps).toEqual(['203.0.113.0/24']);
    expect(keys[0]!.allowedOrigins).toEqual(['https://shop.example']);
  });

  it('rotates with the chosen overlap and revokes after confirmation; another account cannot touch the key', async () => {
    const client = new Client(app.url);
    await client.signIn(HOLDER.email, HOLDER.password);
    let token = Client.token((await client.request('/dashboard/keys')).text);
    const created = await shownAfter(client, await client.request('/dashboard/keys', { form: { _csrf: token, label: 'to rotate' } }));
    const first = newKeyOf(created.text)!;
    recordIssuedKeys([first]);
    const firstId = (await app.keyStore.listKeys(HOLDER.accountId)).find((k) => k.hash === hashApiKey(first))!.id;

    const intruder = new Client(app.url);
    await intruder.signIn(OTHER.email, OTHER.password);
    const intruderToken = Client.token((await intruder.request('/dashboard/keys')).text);
    expect((await intruder.request(`/dashboard/keys/${firstId}/revoke`, { form: { _csrf: intruderToken } })).status).toBe(404);
    expect((await intruder.request(`/dashboard/keys/${firstId}/revoke`)).status).toBe(404);

    const rotated = await shownAfter(client, await client.request(`/dashboard/keys/${firstId}/rotate`, { form: { _csrf: token, overlap: '1h' } }));
    expect(rotated.status).toBe(200);
    const second = newKeyOf(rotated.text)!;
    recordIssuedKeys([second]);
    const keys = await app.keyStore.listKeys(HOLDER.accountId);
    const old = keys.find((k) => k.id === firstId)!;
    const remaining = Date.parse(old.expiresAt!) - Date.now();
    expect(remaining).toBeGreaterThan(55 * 60_000);
    expect(remaining).toBeLessThanOrEqual(3_600_000);
    expect(keys.find((k) => k.hash === hashApiKey(second))!.label).toBe('to rotate');

    const confirm = await client.request(`/dashboard/keys/${firstId}/revoke`);
    expect(confirm.status).toBe(200);
    expect(confirm.text).toContain('cannot be undone');
    token = Client.token(confirm.text);
    const revoked = await client.request(`/dashboard/keys/${firstId}/revoke`, { form: { _csrf: token } });
    expect(revoked.status).toBe(303);
    expect((await fetch(`${app.url}/v1/account`, { headers: { 'x-api-key': first } })).status).toBe(401);
    expect((await fetch(`${app.url}/v1/account`, { headers: { 'x-api-key': second } })).status).toBe(200);
  });

  it('throttles wrong passwords: after 5 for one email, even the right one is refused with 429 and Retry-After', async () => {
    const fresh = await startDashboardApp();
    try {
      const client = new Client(fresh.url);
      for (let i = 0; i < 4; i++) expect((await client.signIn(HOLDER.email, `wrong password ${i}`)).status).toBe(401);
      const fifth = await client.signIn(HOLDER.email, 'wrong password 5');
      expect(fifth.status).toBe(429);
      expect(Number(fifth.headers.get('retry-after'))).toBeGreaterThan(800);
      expect(fifth.text).toContain('Too many failed sign-ins');
      expect((await client.signIn(HOLDER.email, HOLDER.password)).status).toBe(429);
      // Another account from the same address is not locked by this one's count.
      expect((await client.signIn(OTHER.email, OTHER.password)).status).toBe(303);
    } finally {
      await fresh.close();
    }
  });

  it('changes the password: the old one stops working and other sessions are signed out', async () => {
    const fresh = await startDashboardApp();
    try {
      const first = new Client(fresh.url);
      const second = new Client(fresh.url);
      await first.signIn(OTHER.email, OTHER.password);
      await second.signIn(OTHER.email, OTHER.password);
      const token = Client.token((await first.request('/dashboard/account')).text);
      const weak = await first.request('/dashboard/account/password', { form: { _csrf: token, current: OTHER.password, new: 'short', confirm: 'short' } });
      expect(weak.status).toBe(400);
      const changed = await first.request('/dashboard/account/password', {
        form: { _csrf: token, current: OTHER.password, new: 'a brand new passphrase', confirm: 'a brand new passphrase' },
      });
      expect(changed.status).toBe(303);
      expect((await first.request('/dashboard/keys')).status).toBe(200);
      expect((await second.request('/dashboard/keys')).status).toBe(303);
      expect((await new Client(fresh.url).signIn(OTHER.email, OTHER.password)).status).toBe(401);
      expect((await new Client(fresh.url).signIn(OTHER.email, 'a brand new passphrase')).status).toBe(303);
    } finally {
      await fresh.close();
    }
  });

  it('lets a suspended account look but not create keys or try', async () => {
    const fresh = await startDashboardApp();
    try {
      await fresh.keyStore.setAccountStatus(OTHER.accountId, 'suspended');
      const client = new Client(fresh.url);
      expect((await client.signIn(OTHER.email, OTHER.password)).status).toBe(303);
      const keys = await client.request('/dashboard/keys');
      expect(keys.status).toBe(200);
      const token = Client.token(keys.text);
      const create = await client.request('/dashboard/keys', { form: { _csrf: token, label: 'x' } });
      expect(create.status).toBe(403);
      expect(create.text).toContain('Account suspended');
      expect(await fresh.keyStore.listKeys(OTHER.accountId)).toHaveLength(0);
      const tryIt = await client.request('/dashboard/try', { method: 'POST', headers: { 'x-csrf-token': token, 'content-type': 'multipart/form-data; boundary=x' } });
      expect(tryIt.status).toBe(403);
    } finally {
      await fresh.close();
    }
  });

  it('shows the usage page with the plan, quota, rate standing and a 30-day chart of cutouts and refusals with a table', async () => {
    const client = new Client(app.url);
    await client.signIn(HOLDER.email, HOLDER.password);
    // Recorded at a moment the test knows: the row asked about is that day's, even if the page is
    // drawn after midnight (the day is still among its 30).
    const now = new Date();
    app.activity.record(HOLDER.accountId, undefined, now);
    const page = await client.request('/dashboard/usage');
    expect(page.status).toBe(200);
    expect(page.text).toContain('Plan: roomy');
    expect(page.text).toContain('of 500 image credits used');
    // A request counted with no cutout charged for it: a refusal, drawn and listed apart.
    expect(page.text).toMatch(/<rect [^>]*class="bar refused"/);
    expect(page.text).toContain(`<tr><td>${dayOf(now)}</td><td>0</td><td>1</td></tr>`);
    expect((page.text.match(/<tr><td>\d{4}-\d\d-\d\d<\/td>/g) ?? []).length).toBe(30);
  });
});

describe('handler.handleForAccount (Try it)', () => {
  it('applies the plan like a keyed request: the rate limit counts it, a suspended account gets 403, and the day is counted', async () => {
    const app = await startDashboardApp({ plans: { tiny: { requestsPerMinute: 2 } } });
    try {
      const account = { id: 'acct_try', plan: 'tiny', status: 'active' as const };
      const started = new Date();
      const post = () => ({ method: 'POST', url: '/dashboard/try', headers: { 'content-type': 'multipart/form-data; boundary=x' }, body: Readable.from([]), signal: new AbortController().signal });
      // No inference server behind this handler: admitted requests end in 503, but they were admitted and counted.
      expect((await app.handler.handleForAccount(post(), account)).status).toBe(503);
      expect((await app.handler.handleForAccount(post(), account)).status).toBe(503);
      const third = await app.handler.handleForAccount(post(), account);
      expect(third.status).toBe(429);
      expect(JSON.parse(third.body.toString()).code).toBe('rate_limited');
      expect((await app.handler.handleForAccount(post(), { ...account, id: 'acct_other', status: 'suspended' })).status).toBe(403);
      // The days the requests were counted on: today's, or two if the test ran over midnight.
      const days = [...new Set([dayOf(started), dayOf(new Date())])];
      expect((await app.activity.dailyCounts('acct_try', days)).reduce((a, b) => a + b, 0)).toBe(3);
    } finally {
      await app.close();
    }
  });
});

describe('dashboard under HTTPS (as the adapter reports it)', () => {
  it('sets Secure, __Host- named cookies and HSTS', async () => {
    const app = await startDashboardApp();
    try {
      const request = (method: string, url: string, headers: Record<string, string>, body = '') => {
        const stream = Readable.from(body ? [Buffer.from(body)] : []);
        return app.dashboard.handle({ method, url, headers: { host: 'dash.example', ...headers }, body: stream, signal: new AbortController().signal, protocol: 'https', clientIp: '127.0.0.1' });
      };
      const page = await request('GET', '/dashboard/sign-in', {});
      expect(page.headers['strict-transport-security']).toBe('max-age=31536000');
      const csrfCookie = page.headers['set-cookie']!;
      expect(csrfCookie).toMatch(/^__Host-bgcut_csrf=[^;]+; Path=\/; HttpOnly; Secure; SameSite=Strict$/);
      const token = Client.token(page.body.toString());
      const form = new URLSearchParams({ _csrf: token, email: HOLDER.email, password: HOLDER.password }).toString();
      const signedIn = await request('POST', '/dashboard/sign-in', { origin: 'https://dash.example', cookie: csrfCookie.split(';')[0]!, 'content-type': 'application/x-www-form-urlencoded' }, form);
      expect(signedIn.status).toBe(303);
      expect(signedIn.headers['set-cookie']).toMatch(/^__Host-bgcut_session=[^;]+; Max-Age=43200; Path=\/; HttpOnly; Secure; SameSite=Strict$/);
    } finally {
      await app.close();
    }
  });
});

describe('dashboard over HTTP (Fastify, and a host app signing people in)', () => {
  it('serves the sign-in page and signs in through the Fastify plugin', async () => {
    const app = await startDashboardApp({ framework: 'fastify' });
    try {
      const client = new Client(app.url);
      const page = await client.request('/dashboard/sign-in');
      expect(page.status).toBe(200);
      expect(page.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
      expect((await client.signIn(HOLDER.email, HOLDER.password)).status).toBe(303);
      expect((await client.request('/dashboard/keys')).status).toBe(200);
      expect((await client.request('/dashboard/assets/dashboard.js')).headers.get('content-type')).toContain('javascript');
    } finally {
      await app.close();
    }
  });

  it('uses authenticateAccountHolder instead of the embedded sign-in', async () => {
    const app = await startDashboardApp({
      dashboard: {
        authenticateAccountHolder: async (request) => (request.headers['x-test-user'] === 'bob' ? OTHER.accountId : undefined),
        signInUrl: '/login',
        signOutUrl: '/logout',
      },
    });
    try {
      const anonymous = await fetch(`${app.url}/dashboard/keys`, { redirect: 'manual' });
      expect(anonymous.status).toBe(303);
      expect(anonymous.headers.get('location')).toBe('/login?next=%2Fdashboard%2Fkeys');
      expect((await fetch(`${app.url}/dashboard/sign-in`, { redirect: 'manual' })).status).toBe(303);
      const signedIn = await fetch(`${app.url}/dashboard/keys`, { headers: { 'x-test-user': 'bob' } });
      expect(signedIn.status).toBe(200);
      const text = await signedIn.text();
      expect(text).toContain(OTHER.accountId);
      expect(text).toContain('href="/logout"');
    } finally {
      await app.close();
    }
  });
});
