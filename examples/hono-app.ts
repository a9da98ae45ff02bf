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
import { exampleProblem, notFoundProblem, type ExampleProblem } from './problems.js';
import { bodyLimit } from 'hono/body-limit';

/** A 413 is answered before the body is read: the connection closes after it, so no client reuses it mid-body. */
const problemResponse = (problem: ExampleProblem) =>
  new Response(problem.body, { status: problem.status, headers: { 'content-type': problem.contentType, ...(problem.status === 413 ? { connection: 'close' } : {}) } });
import type { Server } from 'node:http';

export function createHonoApp(handler: RemoveBgHandler, prefix = ''): Hono {
  const app = new Hono();
  app.get('/', (c) => c.text('bgcut example (Hono). POST an image to /v1/remove-bg with X-API-KEY.\n'));
  app.get('/healthz', (c) => c.json({ ok: true }));
  // Hono reads bodies without a limit of its own: the app's routes set one.
  app.post(
    '/echo',
    bodyLimit({ maxSize: 100 * 1024, onError: () => problemResponse(exampleProblem({ type: 'entity.too.large', status: 413 })) }),
    async (c) => {
      let body: unknown;
      try {
        body = await c.req.json();
      } catch (error) {
        return problemResponse(exampleProblem({ type: 'entity.parse.failed', status: 400, cause: error }));
      }
      return c.json({ youSent: body });
    },
  );
  // Errors and unknown paths as problem+json: Hono's default answers are plain text.
  app.onError((error) => {
    const problem = exampleProblem(error);
    if (problem.status >= 500) console.error('example app: internal error:', error);
    return problemResponse(problem);
  });
  app.notFound(() => problemResponse(notFoundProblem()));
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
