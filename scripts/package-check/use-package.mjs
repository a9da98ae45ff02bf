/**
 * Runs inside a fresh app that installed the packed tarball (see ../check-package.mjs) and uses
 * the package only as a user can: `bgcut/*` imports and the bins in node_modules/.bin. Every
 * step prints one line; the first failure throws, and the process exits 1.
 *
 * Steps: every `exports` target and bin exists; every peer dependency is optional; every export
 * imports (a dev-only import fails here: devDependencies are not installed); the built-in model
 * is prepared into an empty cache (as an image build does); the inference server starts from
 * .bin and reports SERVING on grpc.health.v1; bgcut-keys makes a key; the container's API app
 * (bgcut/express, the file a Dockerfile runs) and a Fastify app (bgcut/fastify) each return a
 * cutout to bgcut/client; SIGTERM to both tiers with a cutout in flight: it completes, both exit 0.
 */
import { execFile, spawn } from 'node:child_process';
import { accessSync, constants, existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const bin = (name) => path.resolve('node_modules/.bin', name);
const pkgDir = path.resolve('node_modules/bgcut');
const pkg = JSON.parse(readFileSync(path.join(pkgDir, 'package.json'), 'utf8'));
const started = Date.now();
const step = (text) => console.log(`[${((Date.now() - started) / 1000).toFixed(1)} s] ${text}`);
const children = [];
process.on('exit', () => children.forEach((c) => c.exitCode === null && c.kill('SIGKILL')));

function check(condition, message) {
  if (!condition) throw new Error(message);
}

// 1. Every export target and bin is in the tarball.
for (const [subpath, targets] of Object.entries(pkg.exports)) {
  for (const [condition, target] of Object.entries(targets)) {
    check(existsSync(path.join(pkgDir, target)), `export "${subpath}" (${condition}) points at ${target}, which is not in the tarball`);
  }
}
for (const [name, target] of Object.entries(pkg.bin)) {
  accessSync(path.join(pkgDir, target), constants.X_OK);
  accessSync(bin(name), constants.X_OK);
}
step(`${Object.keys(pkg.exports).length} exports and ${Object.keys(pkg.bin).length} bins resolve to files in the tarball`);

// 2. No peer dependency is forced on users: each is optional.
for (const peer of Object.keys(pkg.peerDependencies ?? {})) {
  check(pkg.peerDependenciesMeta?.[peer]?.optional === true, `peer dependency ${peer} is not optional`);
}
step(`peer dependencies all optional: ${Object.keys(pkg.peerDependencies ?? {}).join(', ')}`);

// 3. Every export imports with production dependencies alone.
const modules = {};
for (const subpath of Object.keys(pkg.exports)) {
  const specifier = `bgcut${subpath.slice(1)}`;
  modules[specifier] = await import(specifier);
  check(Object.keys(modules[specifier]).length > 0, `${specifier} exports nothing`);
}
const devOnly = Object.keys(pkg.devDependencies ?? {}).filter((d) => !(d in (pkg.dependencies ?? {})) && !(d in (pkg.peerDependencies ?? {})));
const require = createRequire(path.resolve('package.json'));
const installedDevOnly = devOnly.filter((d) => {
  try {
    require.resolve(`${d}/package.json`);
    return true;
  } catch {
    return false;
  }
});
step(`all ${Object.keys(modules).length} exports import; dev-only packages present in this app: ${installedDevOnly.join(', ') || 'none'}`);

// 4. The model is prepared into the (empty) cache, as the image build does.
const prepared = await run(bin('bgcut-inference-server'), ['prepare'], { env: process.env });
step(`bgcut-inference-server prepare: ${prepared.stdout.trim()}`);

// 5. The inference server from .bin, until grpc.health.v1 says SERVING.
function startProcess(command, args, env, readyPattern) {
  const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let output = '';
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const ready = new Promise((resolve, reject) => {
    const onData = (chunk) => {
      output += chunk;
      const match = readyPattern.exec(output);
      if (match) resolve(match);
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    exited.then(({ code }) => reject(new Error(`${path.basename(args[0] ?? command)} exited with ${code}:\n${output}`)));
  });
  return { child, ready, exited, output: () => output };
}
const inference = startProcess(bin('bgcut-inference-server'), ['--port', '0', '--metrics-port', '0'], {}, /listening on [^\s]+:(\d+)/);
const inferencePort = Number((await inference.ready)[1]);
const address = `127.0.0.1:${inferencePort}`;
for (;;) {
  const probe = await run(bin('bgcut-inference-server'), ['health', '--address', address]).then(
    (r) => r.stdout.trim(),
    (e) => e.stdout?.trim() || 'unreachable',
  );
  if (probe === 'SERVING') break;
  check(inference.child.exitCode === null, `inference server exited:\n${inference.output()}`);
  await new Promise((r) => setTimeout(r, 250));
}
const metricsUrl = /metrics on (http:\/\/[^\s]+\/metrics)/.exec(inference.output())[1];
step(`bgcut-inference-server on ${address}: grpc.health.v1 SERVING`);

// 6. A key from bgcut-keys.
const keysFile = path.resolve('keys.json');
const created = await run(bin('bgcut-keys'), ['keys', 'create', '--file', keysFile, '--account', 'acme', '--plan', 'pro']);
const key = created.stdout.trim().split(/\s+/)[0]; // the key comes first; its id follows on the next line
check(/^bgk_[A-Za-z0-9_-]{20,}$/.test(key ?? ''), `bgcut-keys printed no key: ${created.stdout}`);
step('bgcut-keys keys create: a key');

// 7. The container's API app (bgcut/express), started as its image's CMD does, and a Fastify app (bgcut/fastify).
const api = startProcess(process.execPath, ['--initial-old-space-size=128', '--max-semi-space-size=2', path.resolve('server.mjs')], { PORT: '0', BGCUT_KEYS_FILE: keysFile, BGCUT_INFERENCE_ADDRESS: address }, /bgcut api listening on (\d+)[\s\S]*bgcut api ready/);
const apiUrl = `http://127.0.0.1:${(await api.ready)[1]}`;
const Fastify = (await import('fastify')).default;
const { removeBgPlugin } = modules['bgcut/fastify'];
const { FileKeyStore } = modules['bgcut/core'];
const fastify = Fastify();
await fastify.register(removeBgPlugin, { handler: { keyStore: new FileKeyStore({ file: keysFile }), inference: { address } }, prefix: '/api' });
const fastifyUrl = `${await fastify.listen({ port: 0, host: '127.0.0.1' })}/api`;

const sharp = (await import('sharp')).default;
// A red disc on a noisy grey background: something to cut out.
const noise = Buffer.alloc(320 * 240 * 3);
for (let i = 0; i < noise.length; i++) noise[i] = 90 + ((i * 2654435761) >>> 24) % 60;
const photo = await sharp(noise, { raw: { width: 320, height: 240, channels: 3 } })
  .composite([{ input: Buffer.from('<svg width="320" height="240"><circle cx="160" cy="130" r="70" fill="#c0281e"/></svg>') }])
  .jpeg()
  .toBuffer();
const { BgcutClient } = modules['bgcut/client'];
async function cutout(baseUrl) {
  const result = await new BgcutClient({ baseUrl, apiKey: key, retry: { maxRetries: 0 } }).removeBackground(photo, { filename: 'photo.jpg' });
  const { data, info } = await sharp(result.image).raw().toBuffer({ resolveWithObject: true });
  check(result.contentType === 'image/png' && info.width === 320 && info.height === 240 && info.channels === 4, `unexpected cutout: ${result.contentType} ${info.width}x${info.height}x${info.channels}`);
  let transparent = 0;
  let opaque = 0;
  for (let i = 3; i < data.length; i += 4) {
    if (data[i] === 0) transparent++;
    else if (data[i] === 255) opaque++;
  }
  check(transparent > 0 && opaque > 0, `the cutout's alpha has ${transparent} clear and ${opaque} opaque pixels`);
  return `${info.width}x${info.height} PNG, ${((100 * opaque) / (info.width * info.height)).toFixed(0)}% opaque`;
}
step(`bgcut/express app (server.mjs) via bgcut/client: ${await cutout(apiUrl)}`);
step(`bgcut/fastify app via bgcut/client: ${await cutout(fastifyUrl)}`);
await fastify.close();

// 8. SIGTERM to both tiers while a cutout is in flight: it completes, both exit 0.
const inFlight = cutout(apiUrl);
const busy = async () => {
  const text = await (await fetch(metricsUrl)).text();
  const value = (name) => Number(new RegExp(`^${name}\\{[^}]*\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
  return value('bgcut_inference_running') + value('bgcut_inference_queue_depth') > 0;
};
while (!(await busy())) await new Promise((r) => setTimeout(r, 20));
api.child.kill('SIGTERM');
inference.child.kill('SIGTERM');
const drained = await inFlight;
const [apiExit, inferenceExit] = await Promise.all([api.exited, inference.exited]);
check(apiExit.code === 0 && inferenceExit.code === 0, `exits after SIGTERM: api ${JSON.stringify(apiExit)}, inference ${JSON.stringify(inferenceExit)}`);
check(/SIGTERM: draining/.test(api.output()) && /SIGTERM: draining/.test(inference.output()), 'a process did not log its drain');
step(`SIGTERM with a cutout in flight: it completed (${drained}); api and inference server exited 0`);
console.log('package check passed');
