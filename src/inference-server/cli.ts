#!/usr/bin/env node
/**
 * Standalone inference server:
 *   bgcut-inference-server [--host 0.0.0.0] [--port 50051]
 *                          [--model isnet-fp16 | --model NAME=SOURCE ...] [--model-name isnet]
 *                          [--providers cuda,cpu] [--workers 1] [--threads N] [--queue 4]
 *                          [--tls-cert F --tls-key F [--tls-client-ca F]] [--metrics-port 9464]
 * SOURCE is a built-in model (isnet-fp16, isnet-quint8) or the path of an .onnx file. Each flag
 * can also come from the environment (BGCUT_INFERENCE_<FLAG>, e.g. BGCUT_INFERENCE_PROVIDERS;
 * several models separated by commas); a flag wins over the environment.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { startInferenceServer, type ModelSource } from './server.js';

const FLAGS = ['host', 'port', 'model', 'model-name', 'providers', 'workers', 'threads', 'queue', 'tls-cert', 'tls-key', 'tls-client-ca', 'metrics-port'] as const;
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

/** `--model isnet-fp16` (named by --model-name) or `--model name=source`, repeatable. */
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
    models: models() ?? (setting('model-name') ? [{ name: setting('model-name')!, source: 'isnet-fp16' }] : undefined),
    providers: setting('providers')?.split(',').map((p) => p.trim().toLowerCase()).filter(Boolean),
    workers: integer('workers'),
    intraOpThreads: integer('threads'),
    maxQueue: integer('queue'),
    tls: tls(),
    metricsPort: integer('metrics-port'),
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
