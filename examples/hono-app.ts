/**
 * An ordinary Hono app with routes of its own, and background removal mounted through the fetch
 * adapter (`bgcut/fetch`), served by Node's http server through @hono/node-server.
 * Run: node dist/examples/hono-app.js (expects an inference server on BGCUT_INFERENCE_ADDRESS).
 */
import { serve } from '@hono/node-server';
import { getConnInfo } from '@hono/node-server/conninfo';
import { Hono } from 'hono';
import { pathToFileURL } from 'node:url';
import { createFetchHandler } from '../src/adapters/fetch.js';
import type { RemoveBgHandler } from '../src/core/index.js';
import { handlerFromEnvironment } from './express-app.js';
import { shutDownGracefully } from './graceful-shutdown.js';
import type { Server } from 'node:http';

export function createHonoApp(handler: RemoveBgHandler, prefix = ''): Hono {
  const app = new Hono();
  app.get('/', (c) => c.text('bgcut example (Hono). POST an image to /v1/remove-bg with X-API-KEY.\n'));
  app.get('/healthz', (c) => c.json({ ok: true }));
  app.post('/echo', async (c) => c.json({ youSent: await c.req.json() }));
  const removeBg = createFetchHandler(handler, { prefix });
  // Last, so the app's own routes come first; bgcut answers 404 problem+json for paths it lacks.
  app.all(`${prefix}/*`, (c) => removeBg(c.req.raw, { clientIp: getConnInfo(c).remote.address }));
  return app;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const handler = handlerFromEnvironment();
  await handler.ready();
  const port = Number(process.env.PORT ?? 3000);
  const server = serve({ fetch: createHonoApp(handler).fetch, port }, () => console.log(`hono example listening on http://localhost:${port}`));
  shutDownGracefully(server as Server, handler);
}
