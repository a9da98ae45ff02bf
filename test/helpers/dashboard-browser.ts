import { mkdirSync } from 'node:fs';
import type { Browser } from 'playwright-core';
import { launchChromium } from './browser.js';
import { startDashboardApp, type DashboardApp } from './dashboard-app.js';
import { objectOnTexture } from './synthetic-image.js';

/** Where the browser tests save their screenshots: test/output/screenshots, or docs/screenshots for `npm run screenshots`. */
export const SHOTS = process.env.BGCUT_SCREENSHOT_DIR ?? 'test/output/screenshots';

export interface DashboardInChromium {
  app: DashboardApp;
  browser: Browser;
  /** 640 x 480 JPEG: a red disc (centre 320, 264; radius 144) on a woven background. */
  photo: Buffer;
}

/**
 * What the dashboard's browser tests start with: the dashboard app over the real inference
 * server (model loaded), Debian's chromium, the test photo, and the screenshot folder.
 */
export async function startDashboardInChromium(inferenceAddress: string): Promise<DashboardInChromium> {
  mkdirSync(SHOTS, { recursive: true });
  const [app, browser, photo] = await Promise.all([
    startDashboardApp({ inferenceAddress }),
    launchChromium(),
    objectOnTexture(640, 480, 'jpeg').then((image) => image.bytes),
  ]);
  await app.handler.ready();
  return { app, browser, photo };
}
