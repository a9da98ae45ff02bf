#!/usr/bin/env node
/**
 * Standalone inference server:
 *   bgcut-inference-server [--host 0.0.0.0] [--port 50051]
 *                          [--model isnet | --model NAME=SOURCE ...] [--model-name isnet]
 *                          [--model-file [NAME=]PATH --family FAMILY ...]
 *                          [--providers cuda,cpu] [--workers 1] [--threads N] [--queue 4] [--max-batch 4]
 *                          [--tls-cert F --tls-key F [--tls-client-ca F]] [--metrics-port 9464]
 *                          [--health-port 50052]   (plaintext grpc.health.v1 alone, for probes that cannot do TLS)
 *                          [--test-run-delay-ms N]   (tests and benchmarks only: each run holds its worker N ms longer)
 *                          [--max-free-dim 2048] (largest height or width a model that takes any size is run at)
 *                          [--allow-client-shm true] (clients on this host may pass tensors through /dev/shm:
 *                           Triton's system shared memory extension, off by default as in Triton)
 * With no --model it serves isnet and isnet-int8 (the API's mode table picks one per pass);
 * --model isnet alone pins the float model. SOURCE is a built-in model (isnet: prepared; isnet-int8: the same, statically
 * quantized to 8 bits (docs/model-int8.md); isnet-fp32, isnet-u16, isnet-fp16, isnet-quint8),
 * a model rembg users have, by rembg's name (u2net, birefnet-general, bria-rmbg, ben2, ...: its
 * file is looked for in $U2NET_HOME, then ~/.u2net, never downloaded; several may be listed
 * without names), or the path of an .onnx file. --model-file serves a file of a known family from
 * anywhere (--family birefnet, or a known model's name); one --family applies to every file,
 * or give one per --model-file. --max-batch: most images one session.run stacks from queued calls
 * (every run padded to it; default 1, off: see batching.ts). Each flag can also come from the environment
 * (BGCUT_INFERENCE_<FLAG>, e.g. BGCUT_INFERENCE_PROVIDERS; several models separated by commas);
 * a flag wins over the environment.
 *
 *   bgcut-inference-server export --triton <dir> [--model isnet] [--model-name isnet]
 *                                 [--instance-kind KIND_CPU|KIND_GPU] [--instances 1] [--max-batch 0]
 * writes the model as a Triton model repository (<dir>/<name>/1/model.onnx and config.pbtxt),
 * which Triton or KServe serve in place of this server.
 *
 *   bgcut-inference-server prepare [--model isnet ...]
 * assembles and prepares the built-in models into the cache ($BGCUT_CACHE_DIR), each with the
 * record of what it was made from (model-source.ts), and exits: an image build runs it so that a
 * container starts by hashing the files, without preparing anything.
 *
 *   bgcut-inference-server health [--address 127.0.0.1:50051] [--service NAME] [--timeout-ms 3000] [--tls-ca F]
 * asks grpc.health.v1 once; exit 0 when SERVING, 1 otherwise (a container HEALTHCHECK).
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { probeHealth } from './health-probe.js';
import { isBuiltinModel, resolveModelFile } from './model-source.js';
import path from 'node:path';
import { FAMILIES } from '../models/families.js';
import { isKnownModel } from '../models/known-models.js';
import { resolveServedModel } from './families/served-model.js';
import { DEFAULT_MODELS, startInferenceServer, type ModelSource } from './server.js';
import { exportTritonRepository } from './triton-export.js';

if (process.argv[2] === 'export') {
  const { values: options } = parseArgs({
    args: process.argv.slice(3),
    options: {
      triton: { type: 'string' },
      model: { type: 'string', default: 'isnet' },
      'model-name': { type: 'string', default: 'isnet' },
      'instance-kind': { type: 'string', default: 'KIND_CPU' },
      instances: { type: 'string', default: '1' },
      'max-batch': { type: 'string', default: '0' },
    },
    strict: true,
  });
  if (!options.triton) {
    console.error('usage: bgcut-inference-server export --triton <dir> [--model isnet] [--model-name isnet] [--instance-kind KIND_CPU|KIND_GPU] [--instances 1] [--max-batch 0]');
    process.exit(2);
  }
  const kind = options['instance-kind'];
  if (kind !== 'KIND_CPU' && kind !== 'KIND_GPU') {
    console.error('--instance-kind must be KIND_CPU or KIND_GPU');
    process.exit(2);
  }
  try {
    const written = await exportTritonRepository(options.triton, {
      name: options['model-name']!,
      // A built-in, a known model by rembg's name (found and prepared as the server would), or a file.
      modelFile: (await resolveServedModel({ name: options['model-name']!, source: options.model! })).file,
      instanceKind: kind,
      instances: Number(options.instances),
      maxBatch: Number(options['max-batch']),
    });
    console.log(`wrote ${written.modelFile} and ${written.configFile}; serve with: tritonserver --model-repository ${options.triton}`);
    process.exit(0);
  } catch (error) {
    console.error(`export failed: ${(error as Error).message}`);
    process.exit(1);
  }
}

if (process.argv[2] === 'prepare') {
  const { values: options } = parseArgs({ args: process.argv.slice(3), options: { model: { type: 'string', multiple: true } }, strict: true });
  const specs = (options.model ?? [process.env.BGCUT_INFERENCE_MODEL ?? DEFAULT_MODELS.map((m) => m.source).join(',')]).flatMap((m) => m.split(',')).filter(Boolean);
  try {
    for (const spec of specs) {
      const source = spec.includes('=') ? spec.slice(spec.indexOf('=') + 1) : spec;
      if (!isBuiltinModel(source)) continue; // a file path needs no preparation
      console.log(`${source}: ${await resolveModelFile(source)}`);
    }
    process.exit(0);
  } catch (error) {
    console.error(`prepare failed: ${(error as Error).message}`);
    process.exit(1);
  }
}

if (process.argv[2] === 'health') {
  const { values: options } = parseArgs({
    args: process.argv.slice(3),
    options: {
      address: { type: 'string', default: `127.0.0.1:${process.env.BGCUT_INFERENCE_PORT ?? '50051'}` },
      service: { type: 'string', default: '' },
      'timeout-ms': { type: 'string', default: '3000' },
      'tls-ca': { type: 'string' },
    },
    strict: true,
  });
  try {
    const status = await probeHealth({
      address: options.address!,
      service: options.service,
      timeoutMs: Number(options['timeout-ms']),
      ...(options['tls-ca'] ? { ca: readFileSync(options['tls-ca']) } : {}),
    });
    console.log(status);
    process.exit(status === 'SERVING' ? 0 : 1);
  } catch (error) {
    console.error(`health check failed: ${(error as Error).message}`);
    process.exit(1);
  }
}

const FLAGS = ['host', 'port', 'model', 'model-name', 'model-file', 'family', 'providers', 'workers', 'threads', 'queue', 'max-batch', 'tls-cert', 'tls-key', 'tls-client-ca', 'metrics-port', 'health-port', 'test-run-delay-ms', 'max-free-dim', 'max-connection-age-ms', 'shutdown-grace-ms', 'allow-client-shm'] as const;
type Flag = (typeof FLAGS)[number];

const MULTIPLE = new Set<Flag>(['model', 'model-file', 'family']);

function envName(flag: Flag): string {
  return `BGCUT_INFERENCE_${flag.toUpperCase().replace(/-/g, '_')}`;
}

const { values } = parseArgs({
  options: {
    ...Object.fromEntries(FLAGS.map((name) => [name, { type: 'string' as const, multiple: MULTIPLE.has(name) }])),
    help: { type: 'boolean', short: 'h' },
  },
  strict: true,
});

if (values.help) {
  console.log(`usage: bgcut-inference-server ${FLAGS.map((f) => `[--${f} V]`).join(' ')}`);
  process.exit(0);
}

function fail(message: string): never {
  console.error(message);
  process.exit(2);
}

function setting(flag: Flag): string | undefined {
  const value = (values as Record<string, unknown>)[flag];
  return (Array.isArray(value) ? value.join(',') : (value as string | undefined)) ?? process.env[envName(flag)];
}

function boolean(flag: Flag): boolean | undefined {
  const raw = setting(flag);
  if (raw === undefined) return undefined;
  if (raw !== 'true' && raw !== 'false') fail(`--${flag} must be true or false, got "${raw}"`);
  return raw === 'true';
}

function integer(flag: Flag): number | undefined {
  const raw = setting(flag);
  if (raw === undefined) return undefined;
  if (!/^\d+$/.test(raw)) fail(`--${flag} must be a whole number, got "${raw}"`);
  return Number(raw);
}

/**
 * `--model isnet` (named by --model-name), `--model name=source` or a known model by rembg's
 * name (served under that name), repeatable; `--model-file [name=]path` with `--family`.
 */
function models(): ModelSource[] | undefined {
  const raw = setting('model');
  const files = setting('model-file')?.split(',').filter(Boolean) ?? [];
  if (raw === undefined && files.length === 0) return undefined;
  const specs = raw?.split(',').filter(Boolean) ?? [];
  const single = specs.length + files.length === 1;
  const fromModels = specs.map((spec) => {
    const eq = spec.indexOf('=');
    if (eq > 0) return { name: spec.slice(0, eq), source: spec.slice(eq + 1) };
    if (single) return { name: setting('model-name') ?? (isKnownModel(spec) ? spec : 'isnet'), source: spec };
    // Among several, a built-in or known model is served under its own name.
    if (isKnownModel(spec) || isBuiltinModel(spec)) return { name: spec, source: spec };
    return fail('with several models, name each file: --model name=path');
  });
  const families = setting('family')?.split(',').filter(Boolean) ?? [];
  if (files.length > 0 && families.length !== 1 && families.length !== files.length) {
    fail(`--model-file needs --family (${Object.keys(FAMILIES).join(', ')}, or a known model's name): one for every file, or one per --model-file`);
  }
  if (files.length === 0 && families.length > 0) fail('--family goes with --model-file');
  const fromFiles = files.map((spec, i) => {
    const family = families[families.length === 1 ? 0 : i]!;
    const eq = spec.indexOf('=');
    if (eq > 0) return { name: spec.slice(0, eq), source: spec.slice(eq + 1), family };
    if (single && setting('model-name')) return { name: setting('model-name')!, source: spec, family };
    // Unnamed: the file's name without .onnx, as far as it makes a valid model name.
    const name = path.basename(spec).replace(/\.onnx$/i, '').replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 64);
    return { name, source: spec, family };
  });
  return [...fromModels, ...fromFiles];
}

function tls() {
  const cert = setting('tls-cert');
  const key = setting('tls-key');
  const clientCa = setting('tls-client-ca');
  if (!cert && !key && !clientCa) return undefined;
  if (!cert || !key) fail('--tls-cert and --tls-key go together');
  return { cert: readFileSync(cert), key: readFileSync(key), ...(clientCa ? { clientCa: readFileSync(clientCa) } : {}) };
}

// Tests and benchmarks only (session-worker.ts): the workers read it from the environment.
const testRunDelayMs = integer('test-run-delay-ms');
if (testRunDelayMs !== undefined) process.env.BGCUT_INFERENCE_TEST_RUN_DELAY_MS = String(testRunDelayMs);

try {
  const server = await startInferenceServer({
    host: setting('host'),
    port: integer('port'),
    models: models() ?? (setting('model-name') ? [{ name: setting('model-name')!, source: 'isnet' }] : undefined),
    providers: setting('providers')?.split(',').map((p) => p.trim().toLowerCase()).filter(Boolean),
    workers: integer('workers'),
    intraOpThreads: integer('threads'),
    maxQueue: integer('queue'),
    maxBatch: integer('max-batch'),
    tls: tls(),
    metricsPort: integer('metrics-port'),
    healthPort: integer('health-port'),
    maxFreeDim: integer('max-free-dim'),
    // Short ages make API instances find new servers soon (grpc-js re-resolves DNS on reconnect).
    maxConnectionAgeMs: integer('max-connection-age-ms'),
    // On SIGTERM, how long calls in flight may finish (keep it under the orchestrator's own grace).
    shutdownGraceMs: integer('shutdown-grace-ms'),
    // Triton's flag: clients on this host may pass tensors through /dev/shm (shared-memory-regions.ts).
    sharedMemory: { allowClientShm: boolean('allow-client-shm') },
  });
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`${signal}: draining calls in flight, then stopping`);
    server.shutdown().then(
      () => process.exit(0),
      (error: unknown) => {
        console.error(error);
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
} catch (error) {
  console.error(`inference server failed to start: ${(error as Error).message}`);
  process.exit(1);
}
