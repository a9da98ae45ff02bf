/**
 * `npm start`: the inference server (a child process, as it would be on its own host) and the
 * Express example with the dashboard, on embedded defaults: in-memory rate limits, a file key
 * store in .data/ (with the month's quota and usage and the daily history beside it, so a
 * restart keeps them), the built-in ISNet model. Prints a fresh demo key, a ready curl command,
 * the dashboard's address and a demo sign-in.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ActivityRecorder, FileKeyStore } from '../src/core/index.js';
import { createDashboard, FileDashboardStore, setAccountHolder } from '../src/dashboard/index.js';
import { withoutLauncherMalloc } from '../src/runtime/allocator.js';
import { createExpressApp, handlerFromEnvironment, modelsFromEnvironment } from './express-app.js';
import { shutDownGracefully } from './graceful-shutdown.js';

const port = Number(process.env.PORT ?? 3000);
const inferencePort = Number(process.env.BGCUT_INFERENCE_PORT ?? 50051);
const keysFile = process.env.BGCUT_KEYS_FILE ?? '.data/keys.json';
const demoEmail = 'demo@example.com';
const DEMO_LABEL = 'demo (npm start)';

// BGCUT_INFERENCE_ADDRESS: an inference server that is already running elsewhere (its own host,
// or the test suite's); otherwise one is started here as a child process.
const externalInference = process.env.BGCUT_INFERENCE_ADDRESS;
const inferenceAddress = externalInference ?? `127.0.0.1:${inferencePort}`;
const inference = externalInference ? undefined : startInferenceServer();
// With the server started here, on this host, the API passes the model's tensors through shared
// memory (docs/inference-server.md, "Shared memory with a server on the same host": ModelInfer's
// latency and the server's CPU per call about halved), falling back to the wire on any refusal.
// BGCUT_INFERENCE_SHARED_MEMORY=off turns it off, =auto on with a server started elsewhere on this host.
const sharedMemory = (process.env.BGCUT_INFERENCE_SHARED_MEMORY ?? (externalInference ? 'off' : 'auto')) as 'auto' | 'off';

function startInferenceServer() {
  // The launcher's malloc settings (npm start: glibc tuned, or jemalloc preloaded) are for the API:
  // the inference server keeps the system malloc it was measured with (with 2 arenas, ONNX
  // Runtime's threads could contend on them). Malloc variables the user set are passed on.
  const inferenceEnv = withoutLauncherMalloc(process.env);
  const child = spawn(process.execPath, [fileURLToPath(new URL('../src/inference-server/cli.js', import.meta.url))], {
    // BGCUT_MODELS (see modelsFromEnvironment) names the models for the server too, unless it has its own list.
    env: {
      ...inferenceEnv,
      BGCUT_INFERENCE_PORT: String(inferencePort),
      ...(process.env.BGCUT_MODELS && !process.env.BGCUT_INFERENCE_MODEL ? { BGCUT_INFERENCE_MODEL: process.env.BGCUT_MODELS } : {}),
      // Its client is this process, on this host: the tensors may go through /dev/shm (unless the user said otherwise).
      BGCUT_INFERENCE_ALLOW_CLIENT_SHM: process.env.BGCUT_INFERENCE_ALLOW_CLIENT_SHM ?? 'true',
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  child.on('exit', (code, signal) => {
    console.error(`inference server exited (${signal ?? code}); stopping`);
    process.exit(1);
  });
  return child;
}

const keyStore = new FileKeyStore({ file: keysFile });
const dashboardStore = new FileDashboardStore(keyStore);
const activity = new ActivityRecorder({ store: dashboardStore });
const key = await freshDemoKey();
const demoPassword = randomBytes(9).toString('base64url');
await setAccountHolder(dashboardStore, 'demo', demoEmail, demoPassword);

// A lone request's PNG is encoded in up to 3 row bands while the host's cores are idle (pngBands:
// the same pixels; on a busy host every PNG is encoded whole): on an H200 host, p50 of a 1 MP
// cutout 74 against 84 ms, with no more API CPU per image at load (docs/inference-server.md,
// "Sixth run"). BGCUT_PNG_BANDS=1 encodes every PNG whole, as the library does by default.
const pngBands = process.env.BGCUT_PNG_BANDS ? {} : { pngBands: 3 };
const handler = handlerFromEnvironment({ keyStore, activity, usageStore: dashboardStore.usage, ...pngBands, inference: { address: inferenceAddress, sharedMemory, ...modelsFromEnvironment() } });
const dashboard = createDashboard({ handler, keyStore, store: dashboardStore, activity, secret: dashboardSecret(path.dirname(keysFile)) });
console.log('waiting for the inference server to load the model...');
await handler.ready();

const server = createExpressApp(handler, '', dashboard).listen(port, () => {
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0; // PORT=0: a free port
  console.log(`bgcut listening on http://localhost:${port}`);
  console.log(`demo key: ${key}`);
  console.log(`try: curl -H "X-API-KEY: ${key}" -F file=@photo.jpg http://localhost:${port}/v1/remove-bg -o out.png`);
  console.log(`dashboard: http://localhost:${port}${dashboard.basePath}  (sign in as ${demoEmail} / ${demoPassword})`);
});

/**
 * Only a key's hash is stored, so a key can be shown once: each start mints a fresh demo key and
 * removes the previous demo key, and only it (its id is kept beside the key file). The keys the
 * holder made in the dashboard are the holder's: a restart leaves them as they are.
 */
async function freshDemoKey(): Promise<string> {
  const idFile = path.join(path.dirname(keysFile), 'demo-key-id');
  let previous: string | undefined;
  try {
    previous = readFileSync(idFile, 'utf8').trim();
  } catch {
    previous = undefined;
  }
  const { key, record } = await keyStore.createKey({ accountId: 'demo', plan: 'pro', label: DEMO_LABEL });
  // Removed rather than revoked, so the holder's list does not gather one revoked demo key per
  // restart. A data folder from before the id file: its demo keys are known by their label.
  await keyStore.update((data) => {
    data.keys = data.keys.filter((k) => k.id === record.id || (previous ? k.id !== previous : !(k.accountId === 'demo' && k.label === DEMO_LABEL)));
  });
  mkdirSync(path.dirname(idFile), { recursive: true });
  writeFileSync(idFile, record.id);
  return key;
}

/** BGCUT_DASHBOARD_SECRET, or one made once and kept beside the key file, so sign-ins survive restarts. */
function dashboardSecret(folder: string): string {
  if (process.env.BGCUT_DASHBOARD_SECRET) return process.env.BGCUT_DASHBOARD_SECRET;
  const file = path.join(folder, 'dashboard-secret');
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    mkdirSync(folder, { recursive: true });
    const secret = randomBytes(32).toString('hex');
    writeFileSync(file, secret, { mode: 0o600 });
    return secret;
  }
}

shutDownGracefully(server, handler, async () => {
  await activity.close();
  await dashboardStore.close();
  if (!inference) return;
  inference.removeAllListeners('exit');
  const exited = new Promise((resolve) => inference.once('exit', resolve));
  inference.kill('SIGTERM');
  await exited;
});
