import { mkdtemp } from 'node:fs/promises';
import { captureInternalError } from './helpers/log-capture.js';
import type { Server } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import { chromium, type BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRemoveBgRouter } from '../src/adapters/express.js';
import { createRemoveBgHandler, type KeyStore, type RemoveBgHandler } from '../src/core/index.js';
import { baseUrlOf } from './conformance/suite.js';

const keyStore: KeyStore = { findByHash: async () => undefined };

describe('/docs in a real browser', () => {
  let handler: RemoveBgHandler;
  let server: Server;
  let browser: BrowserContext;
  let base: string;

  beforeAll(async () => {
    handler = createRemoveBgHandler({ keyStore, onInternalError: captureInternalError });
    server = express().use('/api', createRemoveBgRouter(handler)).listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    base = baseUrlOf(server);
    const profile = await mkdtemp(path.join(os.tmpdir(), 'bgcut-chromium-'));
    // A fresh profile each run (Playwright passes it as --user-data-dir).
    browser = await chromium.launchPersistentContext(profile, {
      executablePath: process.env.BGCUT_CHROMIUM ?? '/usr/bin/chromium',
      headless: true,
      viewport: { width: 1200, height: 900 },
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  });
  afterAll(async () => {
    await browser?.close();
    server?.closeAllConnections();
    server?.close();
    await handler?.close();
  });

  it('renders every operation from /v1/openapi.json, loading nothing from elsewhere, with no CSP violation', async () => {
    const page = await browser.newPage();
    const elsewhere: string[] = [];
    const problems: string[] = [];
    // Anything not served by our own server is recorded and never leaves the machine.
    await page.route('**/*', (route) => {
      const url = route.request().url();
      if (url.startsWith(base) || url.startsWith('data:')) return route.continue();
      elsewhere.push(url);
      return route.abort();
    });
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(message.text());
    });
    page.on('pageerror', (error) => problems.push(error.message));
    await page.goto(`${base}/api/docs`);
    await page.locator('.opblock-summary-path', { hasText: '/v1/remove-bg' }).waitFor({ timeout: 30_000 });
    const paths = (await page.locator('.opblock-summary-path').allInnerTexts()).map((p) => p.replace(/\u200b/g, ''));
    // One block per operation of the document the page was given (its paths × methods).
    const document = (await (await fetch(`${base}/api/v1/openapi.json`)).json()) as { paths: Record<string, Record<string, unknown>> };
    const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
    const operations = Object.entries(document.paths).flatMap(([p, item]) => Object.keys(item).filter((m) => METHODS.includes(m)).map(() => p));
    expect([...paths].sort()).toEqual([...operations].sort());
    for (const route of ['/v1/remove-bg', '/v1/account', '/v1/models', '/v1/jobs', '/v1.0/removebg']) expect(paths).toContain(route);
    expect(await page.locator('.servers select option').allInnerTexts()).toEqual(['/api']);
    expect(await page.locator('.info .title').innerText()).toContain('bgcut background removal API');
    if (process.env.BGCUT_DOCS_SCREENSHOT) await page.screenshot({ path: process.env.BGCUT_DOCS_SCREENSHOT });
    expect(elsewhere).toEqual([]);
    expect(problems).toEqual([]);
  });
});
