/**
 * The example apps are safe to expose: oversized and malformed JSON and form bodies, sent to
 * each app's own routes and to bgcut's, are answered with problem+json (remove.bg's error JSON on
 * its route), never with a stack trace, a file path or a parser's own message.
 */
import { serve } from '@hono/node-server';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createHonoApp } from '../examples/hono-app.js';
import { createRemoveBgHandler, type RemoveBgHandler } from '../src/core/index.js';
import { createTestKeys, TEST_PLANS, type TestKeys } from './helpers/fixtures.js';
import { startDashboardApp, type DashboardApp } from './helpers/dashboard-app.js';
import { captureInternalError } from './helpers/log-capture.js';

const big = 'a'.repeat(2 * 1024 * 1024);
const BODIES = [
  { name: 'malformed JSON', type: 'application/json', body: '{"image_url": "https://example.com/a.jpg", ' },
  { name: 'oversized JSON', type: 'application/json', body: JSON.stringify({ note: big }) },
  { name: 'JSON that is not an object', type: 'application/json', body: '[1, 2, 3]' },
  { name: 'malformed form', type: 'application/x-www-form-urlencoded', body: 'size=%zz&&=%&image_file_b64' },
  { name: 'oversized form', type: 'application/x-www-form-urlencoded', body: `note=${big}` },
];

/** Anything that gives away the server's insides. */
function leaks(text: string): string[] {
  const found: string[] = [];
  if (text.includes(process.cwd())) found.push('the working directory');
  if (/node_modules|\/work\/|\/home\/|\/usr\/|[A-Z]:\\\\/.test(text)) found.push('a file path');
  if (/\bat [\w.<>]+ \(|\bat file:|\bat node:/.test(text)) found.push('a stack frame');
  if (/(Syntax|Type|Range|PayloadTooLarge)Error/.test(text)) found.push('an error class name');
  if (/<html|<pre>/i.test(text)) found.push('an HTML error page');
  return found;
}

interface App {
  name: string;
  url: string;
  key: string;
  close(): Promise<void>;
}

describe('the example apps answer bad bodies with problem+json and no stack or path', () => {
  const apps: App[] = [];
  let keys: TestKeys;
  let honoHandler: RemoveBgHandler;

  beforeAll(async () => {
    const address = inject('inferenceAddress');
    for (const framework of ['express', 'fastify'] as const) {
      // The app `npm start` runs (examples/start.ts) is the Express one with the dashboard.
      const app: DashboardApp = await startDashboardApp({ inferenceAddress: address, framework });
      const { key } = await app.keyStore.createKey({ accountId: 'acct_ada', plan: 'roomy' });
      apps.push({ name: framework === 'express' ? 'Express (npm start)' : 'Fastify', url: app.url, key, close: () => app.close() });
    }
    keys = await createTestKeys();
    honoHandler = createRemoveBgHandler({ keyStore: keys.store, plans: TEST_PLANS, inference: { address }, onInternalError: captureInternalError });
    const server = serve({ fetch: createHonoApp(honoHandler).fetch, port: 0, hostname: '127.0.0.1' });
    await new Promise((resolve) => server.once('listening', resolve));
    const port = (server.address() as AddressInfo).port;
    apps.push({
      name: 'Hono',
      url: `http://127.0.0.1:${port}`,
      key: keys.good,
      close: () => new Promise<void>((resolve) => server.close(() => resolve())),
    });
  });

  afterAll(async () => {
    for (const app of apps) await app.close();
    await honoHandler?.close();
  });

  it.each(['/echo', '/v1/remove-bg', '/v1.0/removebg', '/no-such-path'])('POST %s', async (path) => {
    for (const app of apps) {
      for (const { name, type, body } of BODIES) {
        const where = `${app.name} ${path} ${name}`;
        const response = await fetch(`${app.url}${path}`, { method: 'POST', headers: { 'content-type': type, 'x-api-key': app.key }, body });
        const text = await response.text();
        expect(leaks(text), where).toEqual([]);
        expect(response.status, where).toBeLessThan(500);
        // The host's /echo may echo a form it does not parse; everything refused is a problem.
        if (response.status < 400) {
          expect(path, where).toBe('/echo');
          continue;
        }
        const contentType = response.headers.get('content-type') ?? '';
        if (path === '/v1.0/removebg') {
          expect(contentType, where).toMatch(/^application\/json/);
          expect((JSON.parse(text) as { errors: { code: string }[] }).errors[0]!.code, where).toMatch(/^[a-z_]+$/);
        } else {
          expect(contentType, where).toMatch(/^application\/problem\+json/);
          expect((JSON.parse(text) as { code: string }).code, where).toMatch(/^[a-z_]+$/);
        }
      }
    }
  });
});
