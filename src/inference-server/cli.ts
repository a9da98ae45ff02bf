#!/usr/bin/env node
/**
 * Standalone inference server:
 *   bgcut-inference-server [--host 0.0.0.0] [--port 50051]
 *                          [--model isnet | --model NAME=SOURCE ...] [--model-name isnet]
 *                          [--providers cuda,cpu] [--workers 1] [--threads N] [--queue 4] [--max-batch 8]
 *                          [--tls-cert F --tls-key F [--tls-client-ca F]] [--metrics-port 9464]
 *                          [--max-free-dim 2048] (largest height or width a model that takes any size is run at)
 * SOURCE is a built-in model (isnet: prepared, the default; isnet-int8: the same, statically
 * quantized to 8 bits (docs/model-int8.md); isnet-fp32, isnet-u16, isnet-fp16, isnet-quint8)
 * or the path of an .onnx file. --max-batch: most images one session.run stacks from queued calls
 * (default 8 on an accelerator provider, 1 on cpu). Each flag can also come from the environment
 * (BGCUT_INFERENCE_<FLAG>, e.g. BGCUT_INFERENCE_PROVIDERS; several models separated by commas);
 * a flag wins over the environment.
 *
 *   bgcut-inference-server export --triton <dir> [--model isnet] [--model-name isnet]
 *                                 [--instance-kind KIND_CPU|KIND_GPU] [--instances 1] [--max-batch 0]
 * writes the model as a Triton model repository (<dir>/<name>/1/model.onnx and config.pbtxt),
 * which Triton or KServe serve in place of this server.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { resolveModelFile } from './model-source.js';
import { startInferenceServer, type ModelSource } from './server.js';
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
      modelFile: await resolveModelFile(options.model!),
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

const FLAGS = ['host', 'port', 'model', 'model-name', 'providers', 'workers', 'threads', 'queue', 'max-batch', 'tls-cert', 'tls-key', 'tls-client-ca', 'metrics-port', 'max-free-dim'] as const;
type Flag = (typeof FLAGS)[number];

function envName(flag: Flag): string {
  return `BGCUT_INFERENCE_${flag.toUpperCase().replace(/-/g, '_')}`;
}

const { values } = parseArgs({
  options: {
    ...Object.fromEntries(FLAGS.map((name) => [name, { type: 'string' as const, multiple: name === 'model' }])),
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

function integer(flag: Flag): number | undefined {
  const raw = setting(flag);
  if (raw === undefined) return undefined;
  if (!/^\d+$/.test(raw)) fail(`--${flag} must be a whole number, got "${raw}"`);
  return Number(raw);
}

/** `--model isnet` (named by --model-name) or `--model name=source`, repeatable. */
function models(): ModelSource[] | undefined {
  const raw = setting('model');
  if (raw === undefined) return undefined;
  const specs = raw.split(',').filter(Boolean);
  return specs.map((spec) => {
    const eq = spec.indexOf('=');
    if (eq > 0) return { name: spec.slice(0, eq), source: spec.slice(eq + 1) };
    if (specs.length > 1) fail('with several --model flags, name each: --model name=source');
    return { name: setting('model-name') ?? 'isnet', source: spec };
  });
}

function tls() {
  const cert = setting('tls-cert');
  const key = setting('tls-key');
  const clientCa = setting('tls-client-ca');
  if (!cert && !key && !clientCa) return undefined;
  if (!cert || !key) fail('--tls-cert and --tls-key go together');
  return { cert: readFileSync(cert), key: readFileSync(key), ...(clientCa ? { clientCa: readFileSync(clientCa) } : {}) };
}

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
    maxFreeDim: integer('max-free-dim'),
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
