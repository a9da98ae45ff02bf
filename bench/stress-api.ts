/**
 * One API instance as its own process, for bench/refusals.ts and bench/stress.ts (and the
 * SIGTERM test): the example Express or Fastify app with limits from the environment.
 *   STRESS_FRAMEWORK=express|fastify  STRESS_INFERENCE=host:port[,host:port…]  STRESS_KEYS_FILE=keys.json
 *   STRESS_REDIS_URL=redis://…  STRESS_UPLOAD_TIMEOUT_MS  STRESS_MAX_INFERENCES
 * Prints `listening <port>`. On SIGTERM it drains as the examples do (examples/graceful-shutdown.ts):
 * handler.close() answers new requests 503 while the ones in progress finish, then the HTTP
 * server closes gracefully and the process exits 0.
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { createExpressApp } from '../examples/express-app.js';
import { createFastifyApp } from '../examples/fastify-app.js';
import { shutDownGracefully } from '../examples/graceful-shutdown.js';
import { connectRedis, createRemoveBgHandler, FileKeyStore } from '../src/core/index.js';
import { STRESS_PLANS } from '../test/helpers/stress-app.js';

const env = process.env;
const redis = env.STRESS_REDIS_URL ? connectRedis(env.STRESS_REDIS_URL) : undefined;
const handler = createRemoveBgHandler({
  keyStore: new FileKeyStore({ file: env.STRESS_KEYS_FILE!, reloadIntervalMs: 0 }),
  plans: STRESS_PLANS,
  ...(redis ? { redis } : {}),
  inference: { address: (env.STRESS_INFERENCE ?? '127.0.0.1:50051').split(','), timeoutMs: 30_000, retryAfterSeconds: 1 },
  limits: {
    maxUploadBytes: 2 * 1024 * 1024,
    maxInFlight: 2_000,
    maxConcurrentInferences: Number(env.STRESS_MAX_INFERENCES ?? 1),
    uploadTimeoutMs: Number(env.STRESS_UPLOAD_TIMEOUT_MS ?? 10_000),
  },
  exposeMetrics: true,
  onInternalError: (error) => console.error(`internal error: ${error instanceof Error ? error.message : String(error)}`),
});
await handler.ready();

let server: Server;
if ((env.STRESS_FRAMEWORK ?? 'express') === 'express') {
  server = createExpressApp(handler).listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
} else {
  const app = await createFastifyApp(handler);
  await app.listen({ port: 0, host: '127.0.0.1' });
  server = app.server;
}
console.log(`listening ${(server.address() as AddressInfo).port}`);

// The example apps' own shutdown: drain, then close HTTP gracefully, then exit 0.
shutDownGracefully(server, handler, () => redis?.disconnect());
