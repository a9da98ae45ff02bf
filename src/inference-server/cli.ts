#!/usr/bin/env node
/**
 * Standalone inference server:
 *   bgcut-inference-server [--host 0.0.0.0] [--port 50051] [--model isnet-fp16|isnet-quint8|file.onnx]
 *                          [--model-name isnet] [--workers 1] [--threads N] [--queue 4]
 * Each flag can also come from the environment (BGCUT_INFERENCE_HOST, _PORT, _MODEL, _MODEL_NAME,
 * _WORKERS, _THREADS, _QUEUE); a flag wins over the environment.
 */
import { parseArgs } from 'node:util';
import { startInferenceServer } from './server.js';

const FLAGS = {
  host: 'BGCUT_INFERENCE_HOST',
  port: 'BGCUT_INFERENCE_PORT',
  model: 'BGCUT_INFERENCE_MODEL',
  'model-name': 'BGCUT_INFERENCE_MODEL_NAME',
  workers: 'BGCUT_INFERENCE_WORKERS',
  threads: 'BGCUT_INFERENCE_THREADS',
  queue: 'BGCUT_INFERENCE_QUEUE',
} as const;

const { values } = parseArgs({
  options: {
    ...Object.fromEntries(Object.keys(FLAGS).map((name) => [name, { type: 'string' as const }])),
    help: { type: 'boolean', short: 'h' },
  },
  strict: true,
});

if (values.help) {
  console.log(`usage: bgcut-inference-server [--${Object.keys(FLAGS).join(' V] [--')} V]`);
  process.exit(0);
}

function setting(flag: keyof typeof FLAGS): string | undefined {
  return ((values as Record<string, unknown>)[flag] as string | undefined) ?? process.env[FLAGS[flag]];
}

function integer(flag: keyof typeof FLAGS): number | undefined {
  const raw = setting(flag);
  if (raw === undefined) return undefined;
  if (!/^\d+$/.test(raw)) {
    console.error(`--${flag} must be a whole number, got "${raw}"`);
    process.exit(2);
  }
  return Number(raw);
}

try {
  const server = await startInferenceServer({
    host: setting('host'),
    port: integer('port'),
    model: setting('model'),
    modelName: setting('model-name'),
    workers: integer('workers'),
    intraOpThreads: integer('threads'),
    maxQueue: integer('queue'),
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
