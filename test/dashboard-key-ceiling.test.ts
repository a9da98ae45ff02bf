import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_ACTIVE_KEYS } from '../src/dashboard/index.js';
import { recordIssuedKeys } from './helpers/log-capture.js';
import { HOLDER, startDashboardApp, type DashboardApp } from './helpers/dashboard-app.js';

/** A same-origin form client with the session cookie. */
async function signedIn(base: string) {
  let cookie = '';
  const request = async (path: string, form?: Record<string, string>) => {
    const response = await fetch(`${base}${path}`, {
      method: form ? 'POST' : 'GET',
      headers: { origin: base, ...(cookie ? { cookie } : {}), ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) },
      redirect: 'manual',
      ...(form ? { body: new URLSearchParams(form).toString() } : {}),
    });
    const set = response.headers.get('set-cookie');
    if (set) cookie = set.split(';')[0]!;
    return { status: response.status, text: await response.text() };
  };
  const token = (html: string) => /name="csrf-token" content="([^"]+)"/.exec(html)![1]!;
  const page = await request('/dashboard/sign-in');
  await request('/dashboard/sign-in', { _csrf: token(page.text), email: HOLDER.email, password: HOLDER.password });
  const keys = await request('/dashboard/keys');
  return { request, csrf: token(keys.text) };
}

describe('the dashboard\'s ceiling on active keys holds against parallel posts', () => {
  let app: DashboardApp;
  beforeAll(async () => {
    app = await startDashboardApp();
  });
  afterAll(async () => {
    await app?.close();
  });

  it(`${MAX_ACTIVE_KEYS + 10} "create key" posts at once leave the account with exactly ${MAX_ACTIVE_KEYS} active keys`, async () => {
    const { request, csrf } = await signedIn(app.url);
    const before = (await app.keyStore.listKeys(HOLDER.accountId)).filter((k) => !k.revokedAt).length;
    const answers = await Promise.all(Array.from({ length: MAX_ACTIVE_KEYS + 10 }, (_, i) => request('/dashboard/keys', { _csrf: csrf, label: `k${i}`, expires: 'never', ips: '', origins: '' })));
    recordIssuedKeys(answers.flatMap((a) => [.../bgk_[0-9A-Za-z]+/.exec(a.text) ?? []]));
    // Each made key answers 303 to the page that shows it (Post/Redirect/Get).
    const created = answers.filter((a) => a.status === 303).length;
    expect(answers.filter((a) => a.status !== 303).every((a) => a.status === 400 && a.text.includes(`at most ${MAX_ACTIVE_KEYS} active keys`))).toBe(true);
    expect(before + created).toBe(MAX_ACTIVE_KEYS);
    expect((await app.keyStore.listKeys(HOLDER.accountId)).filter((k) => !k.revokedAt)).toHaveLength(MAX_ACTIVE_KEYS);
  }, 120_000);
});
