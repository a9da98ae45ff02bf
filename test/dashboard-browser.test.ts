import http from 'node:http';
import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { lastDays } from '../src/core/index.js';
import { launchChromium } from './helpers/browser.js';
import { HOLDER, OTHER, startDashboardApp, type DashboardApp } from './helpers/dashboard-app.js';
import { recordIssuedKeys } from './helpers/log-capture.js';
import { objectOnTexture } from './helpers/synthetic-image.js';

/**
 * The dashboard in a real browser (Debian's chromium through playwright-core) against the real
 * server and model. Each page is saved as a screenshot: test/output/screenshots by default,
 * docs/screenshots with `npm run screenshots` (the ones the README shows).
 */
const SHOTS = process.env.BGCUT_SCREENSHOT_DIR ?? 'test/output/screenshots';

describe('dashboard in chromium', () => {
  let app: DashboardApp;
  let browser: Browser;
  let photo: Buffer;

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    [app, browser, photo] = await Promise.all([
      startDashboardApp({ inferenceAddress: inject('inferenceAddress') }),
      launchChromium(),
      objectOnTexture(640, 480, 'jpeg').then((image) => image.bytes),
    ]);
    await app.handler.ready();
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
    await newest.getByRole('link', { name: 'Revoke' }).click();
    await expect.poll(() => page.textContent('main')).toContain('cannot be undone');
    await shot(page, 'revoke');
    await page.getByRole('button', { name: 'Revoke key' }).click();
    await page.waitForURL(/notice=revoked/);
    expect(await page.textContent('tbody tr:first-child')).toContain('Revoked');
    const refused = await removeBg(rotated);
    expect(refused.status).toBe(401);
    expect(((await refused.json()) as { code: string }).code).toBe('revoked_api_key');
    await context.close();
  });

  it('Try it: nothing of a result shows before an image is chosen; the cutout appears (transparent corners, opaque centre), downloads, options (quality, background colour, crop) are sent and apply, and tries count on the usage page in credits', async () => {
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

    // Earlier days seeded straight into the store (so the chart in the screenshot has a history); today is real.
    const earlier = lastDays(30).slice(0, 29);
    await app.store.addActivity({ daily: earlier.map((day, i) => ({ accountId: HOLDER.accountId, day, count: Math.max(0, Math.round(30 + 18 * Math.sin(i / 2.5) - (i % 7 >= 5 ? 20 : 0))) })), lastUsed: [] });
    await page.getByRole('link', { name: 'Usage' }).click();
    expect(Number(await page.textContent('#usage-images'))).toBe(before.usage.images + 2);
    const after = await standing();
    expect(after.quota!.used - before.quota!.used).toBe(2);
    expect(await page.textContent('label[for="quota-meter"]')).toBe(`This month's quota: ${after.quota!.used} of 500 image credits used`);
    const today = new Date().toISOString().slice(0, 10);
    expect(Number(await page.locator('table.daily tr', { hasText: today }).locator('td').nth(1).textContent())).toBeGreaterThanOrEqual(1);
    await shot(page, 'usage');
    await context.close();
  }, 180_000);

  it('throttles wrong passwords after 5, refuses a cross-site form post, and sends a page after sign-out to sign-in', async () => {
    const context = await newContext();
    const page = await context.newPage();
    await page.goto(`${app.url}/dashboard/sign-in`);
    for (let i = 1; i <= 5; i++) {
      await page.getByLabel('Email').fill(OTHER.email);
      await page.getByLabel('Password').fill(`not the password ${i}`);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForLoadState();
      expect(await page.textContent('[role="alert"]')).toBe(i < 5 ? 'Wrong email or password.' : 'Too many failed sign-ins. Try again in 15 minutes.');
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
