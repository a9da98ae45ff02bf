/**
 * `npm start`: the inference server (a child process, as it would be on its own host) and the
 * Express example, on embedded defaults: in-memory rate limits, a file key store in .data/,
 * the built-in ISNet model. Prints a fresh demo key and a ready curl command.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { FileKeyStore } from '../src/core/index.js';
import { createExpressApp, handlerFromEnvironment } from './express-app.js';
import { shutDownGracefully } from './graceful-shutdown.js';

const port = Number(process.env.PORT ?? 3000);
const inferencePort = Number(process.env.BGCUT_INFERENCE_PORT ?? 50051);
const keysFile = process.env.BGCUT_KEYS_FILE ?? '.data/keys.json';

const inference = spawn(process.execPath, [fileURLToPath(new URL('../src/inference-server/cli.js', import.meta.url))], {
  env: { ...process.env, BGCUT_INFERENCE_PORT: String(inferencePort) },
  stdio: ['ignore', 'inherit', 'inherit'],
});
inference.on('exit', (code, signal) => {
  console.error(`inference server exited (${signal ?? code}); stopping`);
  process.exit(1);
});

const keyStore = new FileKeyStore({ file: keysFile });
// Only the hash is stored, so a key can be shown once: mint a fresh demo key each start and
// revoke the previous one.
const { key } = await keyStore.createKey({ accountId: 'demo', plan: 'pro', revokeOthers: true });

const handler = handlerFromEnvironment({ keyStore, inference: { address: `127.0.0.1:${inferencePort}` } });
console.log('waiting for the inference server to load the model...');
await handler.ready();

const server = createExpressApp(handler).listen(port, () => {
  console.log(`bgcut listening on http://localhost:${port}`);
  console.log(`demo key: ${key}`);
  console.log(`try: curl -H "X-API-KEY: ${key}" -F file=@photo.jpg http://localhost:${port}/v1/remove-bg -o out.png`);
});

shutDownGracefully(server, handler, async () => {
  inference.removeAllListeners('exit');
  const exited = new Promise((resolve) => inference.once('exit', resolve));
  inference.kill('SIGTERM');
  await exited;
});
