import http from 'node:http';
import { readFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { lastDays } from '../src/core/index.js';
import { launchChromium } from './helpers/browser.js';
import { HOLDER, OTHER, type DashboardApp } from './helpers/dashboard-app.js';
import { SHOTS, startDashboardInChromium } from './helpers/dashboard-browser.js';
import { startExampleProcess, type ExampleProcess } from './helpers/example-process.js';
import { recordIssuedKeys } from './helpers/log-capture.js';
import { clearOfUtcMidnight } from './helpers/utc-day.js';
import { JsonFile } from '../src/dashboard/stores/json-file.js';
import { objectOnTexture } from './helpers/synthetic-image.js';

/**
 * The dashboard in a real browser (Debian's chromium through playwright-core) against the real
 * server and model. Each page is saved as a screenshot: test/output/screenshots by default,
 * docs/screenshots with `npm run screenshots` (the ones the README shows).
 */

/**
 * The tests that compare the month's usage or today's row before and after cutouts made through
 * the browser or another process (clocks they cannot set) start at least this long before UTC
 * midnight (waiting past it otherwise), so they see one day and one month throughout.
 */
const ONE_DAY_MS = 120_000;

/**
 * The 29 days before today seeded straight into the store, so the chart in the screenshots has
 * a history: requests (activity) and, of them, the charged cutouts (the usage the month's total
 * is summed from), written under the file's lock like the store's own writes. Today stays real.
 */
async function seedHistory(app: DashboardApp): Promise<void> {
  const chartDays = lastDays(30); // once: the history and this month's quota from one clock
  const earlier = chartDays.slice(0, 29);
  const cutouts = earlier.map((_, i) => Math.max(0, Math.round(9 + 6 * Math.sin(i / 2.5) - (i % 7 >= 5 ? 6 : 0))));
  const refused = earlier.map((_, i) => (i % 4 === 1 ? 1 : i % 9 === 0 ? 2 : 0));
  await app.store.addActivity({ daily: earlier.map((day, i) => ({ accountId: HOLDER.accountId, day, count: cutouts[i]! + refused[i]! })), lastUsed: [] });
  type WithUsage = { usage?: { days: Record<string, Record<string, { images: number; megapixels: number }>>; quota: Record<string, number> } };
  await new JsonFile<WithUsage>(app.store.file, () => ({})).update((data) => {
    data.usage ??= { days: {}, quota: {} };
    const days = (data.usage.days[HOLDER.accountId] ??= {});
    earlier.forEach((day, i) => (days[day] = { images: cutouts[i]!, megapixels: Math.round(cutouts[i]! * 3.1) / 10 }));
    // The quota counter of this month agrees with them (one credit per cutout on this plan).
    const month = chartDays[29]!.slice(0, 7);
    const key = `${HOLDER.accountId}:${month}`;
    data.usage.quota[key] = (data.usage.quota[key] ?? 0) + earlier.reduce((n, day, i) => n + (day.startsWith(month) ? cutouts[i]! : 0), 0);
  });
}

describe('dashboard in chromium', () => {
  let app: DashboardApp;
  let browser: Browser;
  let photo: Buffer;

  beforeAll(async () => {
    ({ app, browser, photo } = await startDashboardInChromium(inject('inferenceAddress')));
  });
  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  const shot = (page: Page, name: string) => page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });

  async function newContext(): Promise<BrowserContext> {
    const context = await browser.newContext({ viewport: { width: 1200, height: 800 } });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: app.url });
    return context;
  }

  async function signIn(page: Page, who: { email: string; password: string }, first = `${app.url}/dashboard/keys`) {
    await page.goto(first);
    await page.getByLabel('Email').fill(who.email);
    await page.getByLabel('Password').fill(who.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
  }

  const removeBg = (key: string) => {
    const form = new FormData();
    form.append('file', new Blob([photo], { type: 'image/jpeg' }), 'ball.jpg');
    return fetch(`${app.url}/v1/remove-bg`, { method: 'POST', headers: { 'x-api-key': key }, body: form });
  };

  it('signs in, creates a key shown once that works on the API, rotates it, revokes it (then 401)', async () => {
    const context = await newContext();
    const page = await context.newPage();
    // Everything the sign-in page asks for exists (its stylesheet, script, icon).
    const failed: string[] = [];
    page.on('response', (response) => {
      if (response.status() >= 400) failed.push(`${response.status()} ${response.url()}`);
    });
    page.on('requestfailed', (request) => failed.push(`failed ${request.url()}`));
    await page.goto(`${app.url}/dashboard/keys`);
    expect(new URL(page.url()).pathname).toBe('/dashboard/sign-in');
    await page.waitForLoadState('networkidle');
    expect(failed).toEqual([]);
    // Also what the browser asks for on its own and does not report to scripts (the icon).
    expect(app.served.filter((line) => !/^[23]\d\d /.test(line))).toEqual([]);
    await shot(page, 'sign-in');
    await signIn(page, HOLDER, page.url());
    await page.waitForURL(`${app.url}/dashboard/keys`);

    await page.getByLabel('Label').fill('production server');
    await page.getByLabel('Expires').selectOption('90d');
    await page.getByRole('button', { name: 'Create key' }).click();
    const key = await page.locator('#new-key').inputValue();
    recordIssuedKeys([key]);
    expect(key).toMatch(/^bgk_[0-9A-Za-z]{28}$/);
    expect(await page.locator('#curl-line').inputValue()).toContain(`-H "X-API-KEY: ${key}"`);
    // The clipboard starts empty; after Copy it holds exactly the key.
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe('');
    await page.getByRole('button', { name: 'Copy' }).first().click();
    await expect.poll(() => page.locator('.copy-status').textContent()).toBe('Copied.');
    // Compared here, not by expect, so a failure does not print the key.
    expect((await page.evaluate(() => navigator.clipboard.readText())) === key, 'the clipboard holds exactly the new key').toBe(true);
    await shot(page, 'new-key');

    const answer = await removeBg(key);
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toBe('image/png');

    await page.getByRole('link', { name: 'Done' }).click();
    expect(await page.content()).not.toContain(key);
    const row = page.locator('tr', { hasText: 'production server' });
    await expect.poll(() => row.locator('td').nth(3).textContent()).toContain('UTC');
    await shot(page, 'keys');

    // Rotate: a new key, the old one keeps working for the chosen overlap.
    await row.getByLabel('Old key keeps working for').selectOption('1h');
    await row.getByRole('button', { name: 'Rotate' }).click();
    const rotated = await page.locator('#new-key').inputValue();
    recordIssuedKeys([rotated]);
    expect(rotated).not.toBe(key);
    expect(await page.textContent('main')).toContain('keeps working until');
    expect((await fetch(`${app.url}/v1/account`, { headers: { 'x-api-key': key } })).status).toBe(200);
    expect((await fetch(`${app.url}/v1/account`, { headers: { 'x-api-key': rotated } })).status).toBe(200);

    // Revoke the new key, with confirmation.
    await page.getByRole('link', { name: 'Done' }).click();
    const newest = page.locator('tbody tr').first();
    const newestId = (await newest.locator('code').first().textContent())!;
    await newest.getByRole('link', { name: 'Revoke' }).click();
    await expect.poll(() => page.textContent('main')).toContain('cannot be undone');
    await shot(page, 'revoke');
    await page.getByRole('button', { name: 'Revoke key' }).click();
    await page.waitForURL(/notice=revoked/);
    // Out of the live list, in the folded one of revoked and expired keys.
    expect(await page.textContent('details.ended tr:has(code)')).toContain(newestId);
    expect(await page.textContent('details.ended tr:has(code)')).toContain('Revoked');
    const refused = await removeBg(rotated);
    expect(refused.status).toBe(401);
    expect(((await refused.json()) as { code: string }).code).toBe('revoked_api_key');
    await context.close();
  });

  it('Try it: nothing of a result shows before an image is chosen; the cutout appears (transparent corners, opaque centre), downloads, options (quality, background colour, crop) are sent and apply, and tries count on the usage page in credits', async () => {
    await clearOfUtcMidnight(ONE_DAY_MS);
    const context = await newContext();
    const page = await context.newPage();
    // Records the string fields of every form the page posts (the test's own script, outside the page's CSP).
    await page.addInitScript(() => {
      const w = window as unknown as { postedQualities: string[] };
      w.postedQualities = [];
      const original = window.fetch.bind(window);
      window.fetch = (input, init) => {
        if (init?.body instanceof FormData) w.postedQualities.push(String(init.body.get('quality')));
        return original(input, init);
      };
    });
    await signIn(page, HOLDER, `${app.url}/dashboard/try`);
    await page.waitForURL(`${app.url}/dashboard/try`);
    const standing = () => app.handler.accountSummary({ id: HOLDER.accountId, plan: 'roomy', status: 'active' });
    await seedHistory(app);
    const before = await standing();
    // Before an image is chosen: no result area (no empty images, no Download).
    expect(await page.locator('#compare').isVisible()).toBe(false);
    expect(await page.getByRole('link', { name: 'Download' }).isVisible()).toBe(false);
    expect(await page.locator('img').evaluateAll((images) => images.filter((i) => (i as HTMLElement).checkVisibility()).length)).toBe(0);
    await page.setInputFiles('#file', { name: 'ball.jpg', mimeType: 'image/jpeg', buffer: photo });
    expect(await page.getByLabel('Quality').inputValue()).toBe('balanced');
    await page.getByRole('button', { name: 'Remove background' }).click();
    await expect.poll(() => page.textContent('#try-status'), { timeout: 60_000 }).toMatch(/^(Done|Refused|Failed)/);
    expect(await page.textContent('#try-status')).toMatch(/^Done in [\d.]+ s: 640 × 480/);
    expect(await page.content()).not.toMatch(/bgk_[0-9A-Za-z]{28}/);

    // The displayed image's own pixels: drawn to a canvas and read back.
    const pixels = await page.evaluate(() => {
      const img = document.getElementById('result') as HTMLImageElement;
      const canvas = document.createElement('canvas');
      canvas.width = img.naturalWidth;
      canvas.height = img.naturalHeight;
      const ctx = canvas.getContext('2d')!;
      ctx.drawImage(img, 0, 0);
      const alpha = (x: number, y: number) => ctx.getImageData(x, y, 1, 1).data[3]!;
      const w = canvas.width - 1;
      const h = canvas.height - 1;
      return { width: canvas.width, corners: [alpha(2, 2), alpha(w - 2, 2), alpha(2, h - 2), alpha(w - 2, h - 2)], centre: alpha(320, 264) };
    });
    expect(pixels.width).toBe(640);
    for (const corner of pixels.corners) expect(corner).toBeLessThan(10);
    expect(pixels.centre).toBeGreaterThan(245);
    await shot(page, 'try-it');

    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: 'Download' }).click()]);
    expect(download.suggestedFilename()).toBe('ball-nobg.png');
    const saved = readFileSync((await download.path())!);
    const meta = await sharp(saved).metadata();
    expect([meta.format, meta.width, meta.height, meta.hasAlpha]).toEqual(['png', 640, 480, true]);

    // Options: quality fast, a green background and a crop to the subject (the disc: about 288 px across).
    await page.getByLabel('Quality').selectOption('fast');
    await page.getByLabel('Background colour', { exact: true }).first().check();
    await page.locator('#bg-color').fill('#00ff00');
    await page.getByLabel('Crop to the subject').check();
    await page.getByRole('button', { name: 'Remove background' }).click();
    await expect.poll(() => page.textContent('#try-status'), { timeout: 90_000 }).toMatch(/^(Done|Refused|Failed)/);
    expect(await page.textContent('#try-status')).toMatch(/^Done.*: (?!640)\d+ × \d+/);
    const cropped = await page.evaluate(() => {
      const img = document.getElementById('result') as HTMLImageElement;
      const canvas = document.createElement('canvas');
      canvas.width = img.naturalWidth;
      canvas.height = img.naturalHeight;
      const ctx = canvas.getContext('2d')!;
      ctx.drawImage(img, 0, 0);
      return { width: canvas.width, height: canvas.height, corner: [...ctx.getImageData(1, 1, 1, 1).data] };
    });
    expect(cropped.width).toBeGreaterThan(250);
    expect(cropped.width).toBeLessThan(340);
    expect(cropped.corner).toEqual([0, 255, 0, 255]);

    // The page's script sent each try's quality with its image.
    expect(await page.evaluate(() => (window as unknown as { postedQualities: string[] }).postedQualities)).toEqual(['balanced', 'fast']);

    await page.getByRole('link', { name: 'Usage' }).click();
    expect(Number(await page.textContent('#usage-images'))).toBe(before.usage.images + 2);
    const after = await standing();
    expect(after.quota!.used - before.quota!.used).toBe(2);
    expect(await page.textContent('label[for="quota-meter"]')).toBe(`This month's quota: ${after.quota!.used} of 500 image credits used`);
    const today = new Date().toISOString().slice(0, 10);
    expect(Number(await page.locator('table.daily tr', { hasText: today }).locator('td').nth(1).textContent())).toBeGreaterThanOrEqual(2);
    await shot(page, 'usage');
    await context.close();
  }, 180_000 + ONE_DAY_MS);

  it('throttles wrong passwords after 5, refuses a cross-site form post, and sends a page after sign-out to sign-in', async () => {
    const context = await newContext();
    const page = await context.newPage();
    await page.goto(`${app.url}/dashboard/sign-in`);
    for (let i = 1; i <= 5; i++) {
      await page.getByLabel('Email').fill(OTHER.email);
      await page.getByLabel('Password').fill(`not the password ${i}`);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForLoadState();
      expect(await page.textContent('[role="alert"]')).toBe(
        i < 4 ? 'Wrong email or password.' : i === 4 ? 'Wrong email or password. One more wrong password locks sign-in for 15 minutes.' : 'Too many failed sign-ins. Try again in 15 minutes.',
      );
    }
    await page.getByLabel('Password').fill(OTHER.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    expect(await page.textContent('[role="alert"]')).toContain('Too many failed sign-ins');

    // Signed in (as the other holder), the browser visits a page of another origin that posts a form to the dashboard.
    await signIn(page, HOLDER);
    await page.waitForURL(`${app.url}/dashboard/keys`);
    const keysBefore = (await app.keyStore.listKeys(HOLDER.accountId)).length;
    const evil = http.createServer((_req, res) => {
      res.setHeader('content-type', 'text/html');
      res.end(`<form id="f" method="post" action="${app.url}/dashboard/keys"><input name="label" value="planted"><input name="_csrf" value="guess"></form><script>document.getElementById('f').submit()</script>`);
    });
    await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve));
    try {
      const port = (evil.address() as { port: number }).port;
      const [response] = await Promise.all([page.waitForResponse(`${app.url}/dashboard/keys`), page.goto(`http://127.0.0.1:${port}/`)]);
      expect(response.request().method()).toBe('POST');
      expect(response.status()).toBe(403);
      await page.waitForURL(`${app.url}/dashboard/keys`);
      expect(await page.textContent('h1')).toBe('Request refused');
      expect(await app.keyStore.listKeys(HOLDER.accountId)).toHaveLength(keysBefore);
    } finally {
      evil.close();
    }

    await page.goto(`${app.url}/dashboard/account`);
    await shot(page, 'account');
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(/\/dashboard\/sign-in\?notice=signed-out/);
    await page.goto(`${app.url}/dashboard/usage`);
    expect(new URL(page.url()).pathname).toBe('/dashboard/sign-in');
    expect(await page.getByLabel('Email').isVisible()).toBe(true);
    await context.close();
  });
});

/** Elements that stick out sideways: past the window, or past the card they sit in (outside scroll regions). */
function sidewaysOverflow(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const width = window.innerWidth;
    const found: string[] = [];
    const root = document.documentElement;
    if (root.scrollWidth > width) found.push(`the page is ${root.scrollWidth} px wide in a ${width} px window`);
    const name = (el: Element) => `${el.tagName.toLowerCase()}${el.id ? `#${el.id}` : ''}${typeof el.className === 'string' && el.className ? `.${el.className.trim().split(/\s+/).join('.')}` : ''}`;
    for (const el of document.querySelectorAll('body *')) {
      if (el.closest('.visually-hidden, .skip')) continue;
      let scrolled = false;
      for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
        if (['auto', 'scroll', 'hidden', 'clip'].includes(getComputedStyle(a).overflowX)) scrolled = true;
      }
      if (scrolled) continue;
      const r = el.getBoundingClientRect();
      if (r.width === 0 || r.height === 0) continue;
      if (r.right > width + 0.5) found.push(`${name(el)} ends at ${Math.round(r.right)} px`);
      const card = el.parentElement?.closest('.card');
      if (card && r.right > card.getBoundingClientRect().right + 0.5) found.push(`${name(el)} sticks out of its card by ${Math.round(r.right - card.getBoundingClientRect().right)} px`);
    }
    return found;
  });
}

/** Lines the header's navigation (its links and Sign out) takes. */
function navigationLines(page: Page): Promise<number> {
  return page.evaluate(() => {
    const tops = [...document.querySelectorAll('header nav a, header nav .sign-out button, header nav a.sign-out')]
      .map((el) => el.getBoundingClientRect())
      .filter((r) => r.height > 0)
      .map((r) => r.top + r.height / 2)
      .sort((a, b) => a - b);
    let lines = 0;
    let last = -Infinity;
    for (const middle of tops) {
      if (middle - last > 12) lines++;
      last = middle;
    }
    return lines;
  });
}

const VIEWPORTS = [
  { name: 'phone', width: 390, height: 844 },
  { name: 'desktop', width: 1280, height: 800 },
];

describe.each(VIEWPORTS)('dashboard as a key holder uses it, at $width×$height', (viewport) => {
  let app: DashboardApp;
  let browser: Browser;
  let photo: Buffer;

  beforeAll(async () => {
    ({ app, browser, photo } = await startDashboardInChromium(inject('inferenceAddress')));
  });
  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });

  // Phone-width pages join the screenshots (the desktop ones are the first suite's).
  const shot = async (page: Page, name: string, fullPage = true) => {
    if (viewport.name === 'phone') await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage });
  };
  const keyCount = async () => (await app.keyStore.listKeys(HOLDER.accountId)).length;

  async function signedIn(who = HOLDER): Promise<{ context: BrowserContext; page: Page }> {
    const context = await browser.newContext({ viewport: { width: viewport.width, height: viewport.height } });
    const page = await context.newPage();
    await page.goto(`${app.url}/dashboard/keys`);
    await page.getByLabel('Email').fill(who.email);
    await page.getByLabel('Password').fill(who.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${app.url}/dashboard/keys`);
    return { context, page };
  }

  async function createKey(page: Page, label: string): Promise<string> {
    await page.goto(`${app.url}/dashboard/keys`);
    await page.getByLabel('Label').fill(label);
    await page.getByRole('button', { name: 'Create key' }).click();
    const key = await page.locator('#new-key').inputValue();
    recordIssuedKeys([key]);
    return key;
  }

  const rowOf = (page: Page, label: string) => page.locator('table.keys tbody tr', { hasText: label });

  it('reloading the page after creating and after rotating a key makes no second key, and the new secret is shown only once', async () => {
    const { context, page } = await signedIn();
    const before = await keyCount();
    const key = await createKey(page, `reload ${viewport.name}`);
    expect(await keyCount()).toBe(before + 1);
    await page.reload();
    expect(await keyCount()).toBe(before + 1);
    expect(await page.content(), 'the secret is shown once').not.toContain(key);

    await page.goto(`${app.url}/dashboard/keys`);
    await rowOf(page, `reload ${viewport.name}`).first().getByRole('button', { name: 'Rotate' }).click();
    const rotated = await page.locator('#new-key').inputValue();
    recordIssuedKeys([rotated]);
    expect(await keyCount()).toBe(before + 2);
    await page.reload();
    expect(await keyCount()).toBe(before + 2);
    expect(await page.content()).not.toContain(rotated);
    await context.close();
  });

  it('rotates a key twice: the key already being replaced is not rotated again (a clear message), its successor is; no new key gets an expiry nobody asked for', async () => {
    const { context, page } = await signedIn();
    await createKey(page, `twice ${viewport.name}`);
    const original = (await app.keyStore.listKeys(HOLDER.accountId)).find((k) => k.label === `twice ${viewport.name}`)!;
    expect(original.expiresAt).toBeNull();

    await page.goto(`${app.url}/dashboard/keys`);
    await rowOf(page, original.id).getByRole('button', { name: 'Rotate' }).click();
    recordIssuedKeys([await page.locator('#new-key').inputValue()]);
    const afterFirst = await app.keyStore.listKeys(HOLDER.accountId);
    const successor = afterFirst.find((k) => k.label === `twice ${viewport.name}` && k.id !== original.id)!;
    expect(successor.expiresAt, 'the new key keeps the lifetime it was made with: never expires').toBeNull();

    // The same key again, as a second tab still showing the old list would post it.
    const count = afterFirst.length;
    const status = await page.evaluate(async ({ base, id }) => {
      const token = document.querySelector<HTMLMetaElement>('meta[name="csrf-token"]')!.content;
      const response = await fetch(`${base}/keys/${id}/rotate`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ _csrf: token, overlap: '24h' }) });
      document.body.innerHTML = await response.text();
      return response.status;
    }, { base: '/dashboard', id: original.id });
    expect(status).toBe(409);
    expect(await page.textContent('main')).toContain('already being replaced');
    expect(await keyCount()).toBe(count);

    // Its successor can be rotated, and its own successor does not inherit a deadline either.
    await page.goto(`${app.url}/dashboard/keys`);
    await rowOf(page, successor.id).getByRole('button', { name: 'Rotate' }).click();
    recordIssuedKeys([await page.locator('#new-key').inputValue()]);
    const chain = (await app.keyStore.listKeys(HOLDER.accountId)).filter((k) => k.label === `twice ${viewport.name}`);
    expect(chain).toHaveLength(3);
    const newest = chain.sort((a, b) => b.createdAt.localeCompare(a.createdAt))[0]!;
    expect(newest.expiresAt).toBeNull();
    // The page for the key being replaced offers no second rotation.
    await page.goto(`${app.url}/dashboard/keys`);
    expect(await rowOf(page, original.id).getByRole('button', { name: 'Rotate' }).count()).toBe(0);
    await context.close();
  });

  it('every action on every active key is visible, inside the window and clickable; revoked keys are out of the way', async () => {
    const { context, page } = await signedIn();
    for (const n of [1, 2]) await createKey(page, `reach ${n} ${viewport.name}`);
    await page.goto(`${app.url}/dashboard/keys`);
    const width = await page.evaluate(() => window.innerWidth);
    const rows = page.locator('table.keys tbody tr', { has: page.getByRole('button', { name: 'Rotate' }) });
    expect(await rows.count()).toBeGreaterThanOrEqual(2);
    const controls = (await rows.all()).flatMap((row) => [row.getByLabel('Old key keeps working for'), row.getByRole('button', { name: 'Rotate' }), row.getByRole('link', { name: 'Revoke' })]);
    // Where each is laid out, before anything is scrolled: no sideways scrolling (of the page or of
    // a region inside it) is needed to reach it.
    for (const control of controls) {
      expect(await control.isVisible()).toBe(true);
      const box = (await control.boundingBox())!;
      expect(box.x, 'starts inside the window').toBeGreaterThanOrEqual(0);
      expect(box.x + box.width, 'ends inside the window').toBeLessThanOrEqual(width);
    }
    // And nothing covers it: a click would reach it.
    for (const control of controls) await control.click({ trial: true, timeout: 15_000 });
    await page.evaluate(() => window.scrollTo(0, 0));
    await shot(page, `keys-${viewport.name}`, false); // the first screen, as a phone shows it

    // Revoke one: it leaves the list of live keys, and is still there to look at when asked for.
    const revoked = rowOf(page, `reach 1 ${viewport.name}`);
    const id = (await revoked.locator('code').first().textContent())!;
    await revoked.getByRole('link', { name: 'Revoke' }).click();
    await page.getByRole('button', { name: 'Revoke key' }).click();
    await page.waitForURL(/notice=revoked/);
    expect(await page.locator('tr', { hasText: id }).isVisible()).toBe(false);
    await page.getByText(/Revoked and expired keys/).click();
    expect(await page.locator('tr', { hasText: id }).isVisible()).toBe(true);
    await context.close();
  });

  it('no page scrolls sideways, the navigation takes at most two lines, and error pages keep the navigation and Sign out', async () => {
    const anonymous = await browser.newContext({ viewport: { width: viewport.width, height: viewport.height } });
    const signInPage = await anonymous.newPage();
    await signInPage.goto(`${app.url}/dashboard/sign-in`);
    expect(await sidewaysOverflow(signInPage), 'sign-in').toEqual([]);
    await anonymous.close();

    const { context, page } = await signedIn();
    await createKey(page, `fit ${viewport.name}`);
    expect(await sidewaysOverflow(page), 'new key').toEqual([]);
    const id = (await app.keyStore.listKeys(HOLDER.accountId)).find((k) => k.label === `fit ${viewport.name}`)!.id;
    const pages: Array<[string, string]> = [
      ['keys', '/keys'],
      ['revoke', `/keys/${id}/revoke`],
      ['usage', '/usage'],
      ['try', '/try'],
      ['account', '/account'],
      ['not found', '/no-such-page'],
      ['no such key', '/keys/k_nosuchkey/revoke'],
    ];
    for (const [name, address] of pages) {
      await page.goto(`${app.url}/dashboard${address}`);
      expect(await sidewaysOverflow(page), name).toEqual([]);
      expect(await navigationLines(page), `${name}: lines of navigation`).toBeLessThanOrEqual(2);
      expect(await page.getByRole('navigation').getByRole('link', { name: 'Usage' }).isVisible(), `${name}: navigation`).toBe(true);
      expect(await page.getByRole('button', { name: 'Sign out' }).isVisible(), `${name}: Sign out`).toBe(true);
    }
    await page.goto(`${app.url}/dashboard/no-such-page`);
    await shot(page, `not-found-${viewport.name}`);

    // Try it with a cutout on the page (the original and the result side by side, or stacked).
    await page.goto(`${app.url}/dashboard/try`);
    await page.setInputFiles('#file', { name: 'ball.jpg', mimeType: 'image/jpeg', buffer: photo });
    await page.getByRole('button', { name: 'Remove background' }).click();
    await expect.poll(() => page.textContent('#try-status'), { timeout: 60_000 }).toMatch(/^(Done|Refused|Failed)/);
    expect(await page.textContent('#try-status')).toMatch(/^Done/);
    expect(await sidewaysOverflow(page), 'try it with a cutout').toEqual([]);
    await shot(page, `try-it-${viewport.name}`);
    await context.close();
  }, 120_000);

  it('the daily chart is readable: values on a y-axis, no labels on top of each other, cutouts and refusals apart', async () => {
    await seedHistory(app);
    const { context, page } = await signedIn();
    await page.goto(`${app.url}/dashboard/usage`);
    const labels = await page.locator('.chart svg text').evaluateAll((els) =>
      els.map((el) => {
        const r = el.getBoundingClientRect();
        return { text: el.textContent ?? '', axis: el.getAttribute('data-axis') ?? '', left: r.left, right: r.right, top: r.top, bottom: r.bottom, height: r.height };
      }),
    );
    const yValues = labels.filter((l) => l.axis === 'y');
    expect(yValues.length, 'values on the y-axis').toBeGreaterThanOrEqual(2);
    for (const label of labels) expect(label.height, `"${label.text}" is large enough to read`).toBeGreaterThanOrEqual(10);
    for (const [i, a] of labels.entries()) {
      for (const b of labels.slice(i + 1)) {
        const overlap = a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
        expect(overlap, `"${a.text}" and "${b.text}" overlap`).toBe(false);
      }
    }
    // Charged cutouts and refused requests are told apart, in the chart's legend and its table.
    expect(await page.locator('table.daily thead').textContent()).toMatch(/Cutouts.*Refused/);
    await shot(page, `usage-${viewport.name}`);
    await context.close();
  });

  it('sign-in warns before the attempt that locks the account, keeps the email and puts focus on the password', async () => {
    const context = await browser.newContext({ viewport: { width: viewport.width, height: viewport.height } });
    const page = await context.newPage();
    await page.goto(`${app.url}/dashboard/sign-in`);
    await page.getByLabel('Email').fill(OTHER.email);
    for (let i = 1; i <= 4; i++) {
      await page.getByLabel('Password').fill(`wrong password ${i}`);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForLoadState();
      expect(await page.getByLabel('Email').inputValue()).toBe(OTHER.email);
      expect(await page.evaluate(() => document.activeElement?.id)).toBe('password');
      const alert = await page.textContent('[role="alert"]');
      if (i < 4) expect(alert).toBe('Wrong email or password.');
      else expect(alert).toMatch(/^Wrong email or password\. One more wrong password locks sign-in for 15 minutes\./);
    }
    await shot(page, `sign-in-warning-${viewport.name}`);
    await context.close();
  });
});

describe('the example app (npm start), restarted on the same data folder', () => {
  let browser: Browser;
  let photo: Buffer;
  const running: ExampleProcess[] = [];

  beforeAll(async () => {
    [browser, photo] = await Promise.all([launchChromium(), objectOnTexture(640, 480, 'jpeg').then((image) => image.bytes)]);
  });
  afterAll(async () => {
    await browser?.close();
    await Promise.all(running.map((p) => p.stop()));
  });

  async function start(dir: string): Promise<ExampleProcess> {
    const example = await startExampleProcess(dir, inject('inferenceAddress'));
    recordIssuedKeys([example.demoKey]);
    running.push(example);
    return example;
  }

  async function signIn(example: ExampleProcess): Promise<{ context: BrowserContext; page: Page }> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    await page.goto(`${example.url}/dashboard/keys`);
    await page.getByLabel('Email').fill(example.email);
    await page.getByLabel('Password').fill(example.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${example.url}/dashboard/keys`);
    return { context, page };
  }

  const cutout = (example: ExampleProcess, key: string, bytes = photo, type = 'image/jpeg') => {
    const form = new FormData();
    form.append('file', new Blob([bytes], { type }), type === 'image/jpeg' ? 'ball.jpg' : 'notes.txt');
    return fetch(`${example.url}/v1/remove-bg`, { method: 'POST', headers: { 'x-api-key': key }, body: form });
  };

  /** What the usage page shows: the month's images, the quota used, and today's row of the daily table. */
  async function usage(page: Page, example: ExampleProcess) {
    await page.goto(`${example.url}/dashboard/usage`);
    const headers = (await page.locator('table.daily thead th').allTextContents()).map((h) => h.trim());
    const today = page.locator('table.daily tbody tr', { hasText: new Date().toISOString().slice(0, 10) }).locator('td');
    const cell = async (name: string) => Number(await today.nth(headers.indexOf(name)).textContent());
    const quota = /quota: ([\d,.]+) of/.exec((await page.textContent('label[for="quota-meter"]')) ?? '')?.[1];
    return { images: Number(await page.textContent('#usage-images')), quota: Number(quota?.replace(/,/g, '')), cutouts: await cell('Cutouts'), refused: await cell('Refused') };
  }

  it('keeps the keys the holder made and the month\'s usage; the month total, the quota and the daily chart agree before and after', async () => {
    await clearOfUtcMidnight(ONE_DAY_MS);
    const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-example-'));
    const first = await start(dir);
    let { context, page } = await signIn(first);
    const made: string[] = [];
    for (const label of ['restart A', 'restart B']) {
      await page.getByLabel('Label').fill(label);
      await page.getByRole('button', { name: 'Create key' }).click();
      const key = await page.locator('#new-key').inputValue();
      recordIssuedKeys([key]);
      made.push(key);
      await page.goto(`${first.url}/dashboard/keys`);
    }
    expect((await cutout(first, first.demoKey)).status).toBe(200);
    expect((await cutout(first, made[0]!)).status).toBe(200);
    expect((await cutout(first, made[1]!, Buffer.from('not an image'), 'text/plain')).status).toBe(415);
    expect(await usage(page, first)).toEqual({ images: 2, quota: 2, cutouts: 2, refused: 1 });
    await context.close();
    expect(await first.stop()).toBe(0);

    const second = await start(dir);
    ({ context, page } = await signIn(second));
    for (const label of ['restart A', 'restart B']) {
      expect(await page.locator('table.keys tbody tr', { hasText: label }).locator('.status').first().textContent()).toBe('Active');
    }
    for (const key of made) expect((await fetch(`${second.url}/v1/account`, { headers: { 'x-api-key': key } })).status).toBe(200);
    // The demo key is replaced alone.
    expect((await fetch(`${second.url}/v1/account`, { headers: { 'x-api-key': first.demoKey } })).status).toBe(401);
    expect((await fetch(`${second.url}/v1/account`, { headers: { 'x-api-key': second.demoKey } })).status).toBe(200);
    expect(await usage(page, second)).toEqual({ images: 2, quota: 2, cutouts: 2, refused: 1 });
    expect((await cutout(second, second.demoKey)).status).toBe(200);
    expect(await usage(page, second)).toEqual({ images: 3, quota: 3, cutouts: 3, refused: 1 });
    await context.close();
    expect(await second.stop()).toBe(0);
  }, 180_000 + ONE_DAY_MS);
});
