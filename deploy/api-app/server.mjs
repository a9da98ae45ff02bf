/**
 * The API app of the container recipe: an ordinary Express app that depends on the published
 * package (`npm install bgcut express`) and mounts background removal and the dashboard. It is
 * written as a user writes it, against `bgcut/*` only, and the packaging check
 * (scripts/check-package.mjs) runs this very file from an app that installed the packed tarball.
 *
 * Environment: PORT (3000), BGCUT_INFERENCE_ADDRESS (`host:port`, `dns:///name:port`, or
 * comma-separated `ip:port`s), REDIS_URL (shared keys and limits; else BGCUT_KEYS_FILE),
 * BGCUT_DASHBOARD_SECRET (32+ bytes, the same on every instance: mounts /dashboard),
 * BGCUT_TRUST_PROXY (Express `trust proxy`, e.g. `1` behind one load balancer),
 * BGCUT_INFERENCE_TLS_CA / _CERT / _KEY (PEM files: TLS, or mutual TLS with a certificate, to the inference tier),
 * BGCUT_MAX_CONCURRENT_INFERENCES (inference calls this instance makes at once; default 4),
 * BGCUT_IDEMPOTENCY_REDIS_MAX_BYTES (answers this instance keeps in Redis for Idempotency-Key retries; default 128 MiB).
 * REDIS_URL may name one server, a Cluster or Sentinels (docs/redis.md).
 * SIGTERM: new requests get 503 + Retry-After, requests in progress finish, then the process exits 0.
 */
import { readFileSync } from 'node:fs';
import express from 'express';
import { createRemoveBgRouter } from 'bgcut/express';
import { createDashboardRouter } from 'bgcut/express-dashboard';
import { ActivityRecorder, connectRedis, createRemoveBgHandler, FileKeyStore, RedisKeyStore } from 'bgcut/core';
import { createDashboard, FileDashboardStore, RedisDashboardStore } from 'bgcut/dashboard';

const port = Number(process.env.PORT ?? 3000);
const address = (process.env.BGCUT_INFERENCE_ADDRESS ?? '127.0.0.1:50051').split(',').map((a) => a.trim());
const tlsFile = (name) => (process.env[name] ? readFileSync(process.env[name]) : undefined);
const tls = process.env.BGCUT_INFERENCE_TLS_CA
  ? { ca: tlsFile('BGCUT_INFERENCE_TLS_CA'), cert: tlsFile('BGCUT_INFERENCE_TLS_CERT'), key: tlsFile('BGCUT_INFERENCE_TLS_KEY') }
  : undefined;
const redis = process.env.REDIS_URL ? connectRedis(process.env.REDIS_URL) : undefined;
const positiveEnv = (name, raw) => {
  if (raw === undefined || raw === '') return undefined;
  if (!/^[1-9]\d*$/.test(raw)) throw new RangeError(`${name} must be a positive whole number, got "${raw}"`);
  return Number(raw);
};
const maxConcurrentInferences = positiveEnv('BGCUT_MAX_CONCURRENT_INFERENCES', process.env.BGCUT_MAX_CONCURRENT_INFERENCES);
const idempotencyRedisMaxBytes = positiveEnv('BGCUT_IDEMPOTENCY_REDIS_MAX_BYTES', process.env.BGCUT_IDEMPOTENCY_REDIS_MAX_BYTES);
const keyStore = redis ? new RedisKeyStore({ redis }) : new FileKeyStore({ file: process.env.BGCUT_KEYS_FILE ?? '.data/keys.json' });
const dashboardStore = redis ? new RedisDashboardStore({ redis }) : new FileDashboardStore(keyStore);
const activity = process.env.BGCUT_DASHBOARD_SECRET ? new ActivityRecorder({ store: dashboardStore }) : undefined;

const handler = createRemoveBgHandler({
  keyStore,
  redis,
  inference: { address: address.length === 1 ? address[0] : address, ...(tls ? { tls } : {}) },
  ...(maxConcurrentInferences ? { limits: { maxConcurrentInferences } } : {}),
  ...(idempotencyRedisMaxBytes ? { idempotency: { redisMaxBytes: idempotencyRedisMaxBytes } } : {}),
  ...(activity ? { activity } : {}),
  exposeMetrics: true,
  onResponse: (entry) => console.log(JSON.stringify({ at: new Date().toISOString(), ...entry })),
});

const app = express();
app.disable('x-powered-by');
if (process.env.BGCUT_TRUST_PROXY) app.set('trust proxy', Number.isNaN(Number(process.env.BGCUT_TRUST_PROXY)) ? process.env.BGCUT_TRUST_PROXY : Number(process.env.BGCUT_TRUST_PROXY));
if (activity) {
  // With `redis` the sign-in throttle is shared: 5 attempts mean 5 across all pods, not 5 per pod.
  const dashboard = createDashboard({ handler, keyStore, store: dashboardStore, activity, secret: process.env.BGCUT_DASHBOARD_SECRET, ...(redis ? { redis } : {}) });
  app.use(dashboard.basePath, createDashboardRouter(dashboard));
}
// Liveness of this process alone; readiness (the inference tier answers) is GET /readyz.
app.get('/healthz', (_req, res) => res.json({ ok: true }));
let ready = false;
let stopping = false;
app.get('/readyz', (_req, res) => res.status(ready && !stopping ? 200 : 503).json({ ready: ready && !stopping }));
app.use(createRemoveBgRouter(handler));

const server = app.listen(port, '0.0.0.0', () => console.log(`bgcut api listening on ${server.address().port}`));
// Waits for the inference server to answer (and checks its model fits), then reports ready.
handler.ready().then(
  () => {
    ready = true;
    console.log('bgcut api ready');
  },
  (error) => {
    console.error(`inference tier not usable: ${error.message}`);
    process.exit(1);
  },
);

async function stop(signal) {
  if (stopping) return;
  stopping = true;
  console.log(`${signal}: draining requests in progress`);
  await handler.close();
  const force = setTimeout(() => server.closeAllConnections(), 2_000);
  await new Promise((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections();
  });
  clearTimeout(force);
  await activity?.close();
  redis?.disconnect();
  process.exit(0);
}
process.on('SIGTERM', () => void stop('SIGTERM'));
process.on('SIGINT', () => void stop('SIGINT'));
