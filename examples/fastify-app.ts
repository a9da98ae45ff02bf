/**
 * An ordinary Fastify app with routes of its own, and background removal registered as an
 * encapsulated plugin under /api.
 * Run: node dist/examples/fastify-app.js (expects an inference server on BGCUT_INFERENCE_ADDRESS).
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { pathToFileURL } from 'node:url';
import { dashboardPlugin } from '../src/adapters/fastify-dashboard.js';
import { removeBgPlugin } from '../src/adapters/fastify.js';
import type { RemoveBgHandler } from '../src/core/index.js';
import type { Dashboard } from '../src/dashboard/index.js';
import { handlerFromEnvironment } from './express-app.js';
import { shutDownGracefully } from './graceful-shutdown.js';
import { exampleProblem, notFoundProblem } from './problems.js';

/** `dashboard`, when given, is registered at its basePath. */
export async function createFastifyApp(handler: RemoveBgHandler, prefix = '', dashboard?: Dashboard): Promise<FastifyInstance> {
  const app = Fastify({ logger: false });
  // Fastify's own refusals (a body over its 1 MiB limit, malformed JSON) and unknown paths as
  // problem+json, with no error message (which may hold a path) and no stack.
  app.setErrorHandler((error, _request, reply) => {
    const problem = exampleProblem(error);
    if (problem.status >= 500) console.error('example app: internal error:', error);
    return reply.code(problem.status).type(problem.contentType).send(problem.body);
  });
  app.setNotFoundHandler((_request, reply) => {
    const problem = notFoundProblem();
    return reply.code(problem.status).type(problem.contentType).send(problem.body);
  });
  app.get('/', async () => 'bgcut example (Fastify). POST an image to /v1/remove-bg with X-API-KEY.\n');
  app.get('/healthz', async () => ({ ok: true }));
  // Uses Fastify's own JSON parser, which the plugin's encapsulated parsers leave alone.
  app.post('/echo', async (request) => ({ youSent: request.body }));
  await app.register(removeBgPlugin, { handler, prefix });
  if (dashboard) await app.register(dashboardPlugin, { dashboard });
  return app;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const handler = handlerFromEnvironment();
  await handler.ready();
  const port = Number(process.env.PORT ?? 3000);
  const app = await createFastifyApp(handler);
  await app.listen({ port, host: '0.0.0.0' });
  console.log(`fastify example listening on http://localhost:${port}`);
  shutDownGracefully(app.server, handler);
}
