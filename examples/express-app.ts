/**
 * An ordinary Express app with routes of its own, and background removal mounted beside them.
 * Run: node dist/examples/express-app.js (expects an inference server on BGCUT_INFERENCE_ADDRESS).
 */
import express, { type Express } from 'express';
import { pathToFileURL } from 'node:url';
import { createDashboardRouter } from '../src/adapters/express-dashboard.js';
import { createRemoveBgRouter } from '../src/adapters/express.js';
import type { Dashboard } from '../src/dashboard/index.js';
import { logAccess } from './access-log.js';
import { shutDownGracefully } from './graceful-shutdown.js';
import { exampleProblem, notFoundProblem } from './problems.js';
import {
  connectRedis,
  createRemoveBgHandler,
  FileKeyStore,
  ISNET_PROFILE,
  loadPlansFile,
  modelProfile,
  PROFILES,
  RedisKeyStore,
  type PreprocessingProfile,
  type RemoveBgHandler,
  type RemoveBgOptions,
} from '../src/core/index.js';

/**
 * `prefix` mounts the endpoint below a path of the host app, e.g. `/api` serves `POST /api/v1/remove-bg`;
 * `dashboard`, when given, is mounted at its basePath (before any body parser).
 */
export function createExpressApp(handler: RemoveBgHandler, prefix = '', dashboard?: Dashboard): Express {
  const app = express();
  app.disable('x-powered-by');
  if (dashboard) app.use(dashboard.basePath, createDashboardRouter(dashboard));
  // bgcut before any body parser: it reads its own bodies (multipart, and remove.bg's JSON and
  // forms with base64 images) with its own limits. Paths it does not serve fall through.
  app.use(prefix || '/', createRemoveBgRouter(handler));
  // The host app's own JSON parser, for its own routes.
  app.use(express.json({ limit: '100kb' }));
  app.get('/', (_req, res) => {
    res.type('text/plain').send('bgcut example (Express). POST an image to /v1/remove-bg with X-API-KEY.\n');
  });
  app.get('/healthz', (_req, res) => {
    res.json({ ok: true });
  });
  app.post('/echo', (req, res) => {
    res.json({ youSent: req.body as unknown });
  });
  // Last: unknown paths and errors (a body parser's refusal included) as problem+json, never
  // Express's default HTML page, which shows the stack trace and file paths.
  app.use((_req, res) => {
    const problem = notFoundProblem();
    res.status(problem.status).type(problem.contentType).send(problem.body);
  });
  app.use((error: unknown, _req: express.Request, res: express.Response, next: express.NextFunction) => {
    if (res.headersSent) return next(error);
    const problem = exampleProblem(error);
    if (problem.status >= 500) console.error('example app: internal error:', error);
    res.status(problem.status).type(problem.contentType).send(problem.body);
  });
  return app;
}

/**
 * The handler as configured by the environment: REDIS_URL (shared keys and limits for many
 * instances; else a key file and in-memory limits), BGCUT_KEYS_FILE, BGCUT_PLANS_FILE,
 * BGCUT_REDIS_FAILURE_MODE, BGCUT_INFERENCE_ADDRESS, BGCUT_INFERENCE_TIMEOUT_MS, BGCUT_MODEL_PROFILE (`isnet`, the prepared model, by
 * default; `isnet-fp32` for ISNet as shipped), BGCUT_PIXEL_THREADS, BGCUT_RENDER_BANDS, BGCUT_PNG_BANDS. Access log lines go to stdout, with key ids only.
 */
/**
 * BGCUT_MODELS=birefnet-general,isnet: the models the API offers (the first is the default),
 * each with its profile: `isnet` the built-in one, any other a model rembg users have (see
 * docs/models.md). The inference server must serve the same names (BGCUT_INFERENCE_MODEL).
 */
export function modelsFromEnvironment(): { models: Record<string, PreprocessingProfile>; modelName: string } | Record<string, never> {
  const names = (process.env.BGCUT_MODELS ?? '').split(',').map((n) => n.trim()).filter(Boolean);
  if (names.length === 0) return {};
  // The prepared built-ins (isnet, isnet-int8, isnet-fp32) take and return the same tensors: ISNet's profile.
  const builtin = (name: string) => ['isnet', 'isnet-int8', 'isnet-fp32'].includes(name);
  return { models: Object.fromEntries(names.map((name) => [name, builtin(name) ? ISNET_PROFILE : modelProfile(name)])), modelName: names[0]! };
}

export function handlerFromEnvironment(overrides: Partial<RemoveBgOptions> = {}): RemoveBgHandler {
  const redis = process.env.REDIS_URL ? connectRedis(process.env.REDIS_URL) : undefined;
  return createRemoveBgHandler({
    keyStore: redis ? new RedisKeyStore({ redis }) : new FileKeyStore({ file: process.env.BGCUT_KEYS_FILE ?? '.data/keys.json' }),
    redis,
    // Only with Redis: without it the limits are in memory and the option would be warned about.
    ...(redis ? { redisFailureMode: process.env.BGCUT_REDIS_FAILURE_MODE === 'insurance' ? ('insurance' as const) : ('fail-closed' as const) } : {}),
    ...(process.env.BGCUT_PLANS_FILE ? { plans: loadPlansFile(process.env.BGCUT_PLANS_FILE) } : {}),
    inference: {
      address: process.env.BGCUT_INFERENCE_ADDRESS ?? '127.0.0.1:50051',
      profile: PROFILES[(process.env.BGCUT_MODEL_PROFILE ?? 'isnet') as keyof typeof PROFILES] ?? PROFILES.isnet,
      ...(process.env.BGCUT_INFERENCE_TIMEOUT_MS ? { timeoutMs: Number(process.env.BGCUT_INFERENCE_TIMEOUT_MS) } : {}),
      // BGCUT_MODE_MODELS=off: every pass on the request's model (the mode table's models unused).
      ...(process.env.BGCUT_MODE_MODELS === 'off' ? { modeModels: false } : {}),
      // BGCUT_INFERENCE_SHARED_MEMORY=auto: tensors through /dev/shm with a server on this host (docs/configuration.md).
      ...(process.env.BGCUT_INFERENCE_SHARED_MEMORY ? { sharedMemory: process.env.BGCUT_INFERENCE_SHARED_MEMORY as 'auto' | 'off' } : {}),
      ...(process.env.BGCUT_INFERENCE_SHARED_MEMORY_SLOTS ? { sharedMemorySlots: Number(process.env.BGCUT_INFERENCE_SHARED_MEMORY_SLOTS) } : {}),
      ...modelsFromEnvironment(),
    },
    onResponse: logAccess,
    exposeMetrics: true,
    // Off unless set (mainThreadGcBytes: a lower peak for longer pauses); a value that is not a whole number of bytes is refused at start.
    ...(process.env.BGCUT_MAIN_THREAD_GC_MB ? { mainThreadGcBytes: Number(process.env.BGCUT_MAIN_THREAD_GC_MB) * 1_048_576 } : {}),
    // Pixel workers and the most one idle render is split across (1: never split); refused at start unless whole numbers in 1..256.
    ...(process.env.BGCUT_PIXEL_THREADS ? { pixelThreads: Number(process.env.BGCUT_PIXEL_THREADS) } : {}),
    ...(process.env.BGCUT_RENDER_BANDS ? { renderBands: Number(process.env.BGCUT_RENDER_BANDS) } : {}),
    // Most row bands one PNG is encoded in while cores are idle (1: whole); refused at start unless a whole number in 1..16.
    ...(process.env.BGCUT_PNG_BANDS ? { pngBands: Number(process.env.BGCUT_PNG_BANDS) } : {}),
    ...overrides,
  });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const handler = handlerFromEnvironment();
  await handler.ready();
  const port = Number(process.env.PORT ?? 3000);
  const server = createExpressApp(handler).listen(port, () => console.log(`express example listening on http://localhost:${port}`));
  shutDownGracefully(server, handler);
}
