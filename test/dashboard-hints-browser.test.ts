import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { HOLDER, type DashboardApp } from './helpers/dashboard-app.js';
import { SHOTS, startDashboardInChromium } from './helpers/dashboard-browser.js';

/**
 * Try it's brush on a phone (390 px wide, touch): strokes drawn with real touch events (CDP's
 * Input.dispatchTouchEvent, which the page sees as pointer events of type touch), the `hints`
 * part the page posts (captured in the page), and the cutout the real API and model return.
 */
describe('Try it brush in chromium on a phone', () => {
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

  /** A touch drag through image points (the photo's own pixels), as a finger on the screen. */
  async function drag(page: Page, cdp: { send(method: string, params: object): Promise<unknown> }, points: [number, number][]) {
    const box = (await page.locator('#brush-canvas').boundingBox())!;
    const screen = ([x, y]: [number, number]) => ({ x: box.x + (x * box.width) / 640, y: box.y + (y * box.height) / 480 });
    await cdp.send('Input.dispatchTouchEvent', { type: 'touchStart', touchPoints: [screen(points[0]!)] });
    for (const point of points.slice(1)) await cdp.send('Input.dispatchTouchEvent', { type: 'touchMove', touchPoints: [screen(point)] });
    await cdp.send('Input.dispatchTouchEvent', { type: 'touchEnd', touchPoints: [] });
  }

  it('a keep stroke on the background and a remove stroke across the subject are sent as `hints` and honoured (alpha 255 / 0), the rest stays the model\'s', async () => {
    const context = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, deviceScaleFactor: 2 });
    const page = await context.newPage();
    // Keeps the `hints` part of each form the page posts, base64 (the test's own script, outside the page's CSP).
    await page.addInitScript(() => {
      const w = window as unknown as { postedHints: (string | null)[] };
      w.postedHints = [];
      const original = window.fetch.bind(window);
      window.fetch = async (input, init) => {
        if (init?.body instanceof FormData) {
          const hints = init.body.get('hints');
          let encoded: string | null = null;
          if (hints instanceof Blob) {
            let text = '';
            for (const byte of new Uint8Array(await hints.arrayBuffer())) text += String.fromCharCode(byte);
            encoded = btoa(text);
          }
          w.postedHints.push(encoded);
        }
        return original(input, init);
      };
    });
    await page.goto(`${app.url}/dashboard/try`);
    await page.getByLabel('Email').fill(HOLDER.email);
    await page.getByLabel('Password').fill(HOLDER.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${app.url}/dashboard/try`);

    expect(await page.locator('#brush').isVisible()).toBe(false);
    await page.setInputFiles('#file', { name: 'ball.jpg', mimeType: 'image/jpeg', buffer: photo });
    await expect.poll(() => page.locator('#brush-canvas').isVisible()).toBe(true);
    expect(await page.locator('#brush-canvas').evaluate((c: HTMLCanvasElement) => [c.width, c.height])).toEqual([640, 480]);
    await page.locator('#brush-canvas').scrollIntoViewIfNeeded();

    const cdp = await context.newCDPSession(page);
    // Keep: along the top of the background (the disc starts at y = 120).
    await drag(page, cdp, [[40, 40], [100, 40], [160, 40], [220, 40]]);
    // Remove: across the disc's middle.
    await page.getByLabel('Remove', { exact: true }).check();
    await drag(page, cdp, [[250, 264], [300, 264], [350, 264], [390, 264]]);
    const scrolled = await page.evaluate(() => document.scrollingElement!.scrollWidth);
    expect(scrolled).toBeLessThanOrEqual(390);
    await page.screenshot({ path: path.join(SHOTS, 'try-it-brush-phone.png'), fullPage: true });

    await page.getByRole('button', { name: 'Remove background' }).click();
    await expect.poll(() => page.textContent('#try-status'), { timeout: 90_000 }).toMatch(/^(Done|Refused|Failed)/);
    expect(await page.textContent('#try-status')).toMatch(/^Done in [\d.]+ s: 640 × 480/);

    // The request carried a hints part: a PNG of the photo's size, white under the keep stroke,
    // black under the remove stroke, transparent elsewhere.
    const posted = await page.evaluate(() => (window as unknown as { postedHints: (string | null)[] }).postedHints);
    expect(posted).toHaveLength(1);
    expect(posted[0]).not.toBeNull();
    const { data: hints, info } = await sharp(Buffer.from(posted[0]!, 'base64')).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
    expect([info.width, info.height]).toEqual([640, 480]);
    const hint = (x: number, y: number) => [...hints.subarray((y * 640 + x) * 4, (y * 640 + x) * 4 + 4)];
    expect(hint(130, 40)).toEqual([255, 255, 255, 255]);
    expect(hint(320, 264)).toEqual([0, 0, 0, 255]);
    expect(hint(600, 440)[3]).toBe(0);

    // The cutout the page shows honours them; away from the strokes it is the model's.
    const alpha = await page.evaluate(() => {
      const img = document.getElementById('result') as HTMLImageElement;
      const canvas = document.createElement('canvas');
      canvas.width = img.naturalWidth;
      canvas.height = img.naturalHeight;
      const ctx = canvas.getContext('2d')!;
      ctx.drawImage(img, 0, 0);
      const at = (x: number, y: number) => ctx.getImageData(x, y, 1, 1).data[3]!;
      return { keep: [at(60, 40), at(130, 40), at(200, 40)], remove: [at(270, 264), at(320, 264), at(370, 264)], background: at(600, 440), subject: at(320, 180) };
    });
    expect(alpha.keep).toEqual([255, 255, 255]);
    expect(alpha.remove).toEqual([0, 0, 0]);
    expect(alpha.background).toBeLessThan(10);
    expect(alpha.subject).toBeGreaterThan(245);

    // Clear strokes: the next try sends no hints.
    await page.getByRole('button', { name: 'Clear strokes' }).click();
    await page.getByRole('button', { name: 'Remove background' }).click();
    await expect.poll(() => page.evaluate(() => (window as unknown as { postedHints: unknown[] }).postedHints.length)).toBe(2);
    expect((await page.evaluate(() => (window as unknown as { postedHints: (string | null)[] }).postedHints))[1]).toBeNull();
    await expect.poll(() => page.textContent('#try-status'), { timeout: 90_000 }).toMatch(/^(Done|Refused|Failed)/);
    await context.close();
  }, 240_000);
});
