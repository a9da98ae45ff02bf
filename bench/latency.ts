/**
 * npm run bench [-- --image photo.jpg] [--runs 7] [--json out.json]
 *
 * End-to-end HTTP latency of POST /v1/remove-bg (Express adapter, real inference server in its
 * own process) against raw in-process `session.run` of the same model on the same number of
 * threads, measured alternately in one run so that both see the same machine load. Prints
 * medians and the ratio end-to-end / raw.
 */
import ort from 'onnxruntime-node';
import { readFile, writeFile, mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import sharp from 'sharp';
import { createExpressApp } from '../examples/express-app.js';
import { createRemoveBgHandler, FileKeyStore, ISNET_PROFILE } from '../src/core/index.js';
import { rgbToTensor } from '../src/core/image/tensor.js';
import { resolveModelFile } from '../src/inference-server/model-source.js';
import { startInferenceProcess } from '../test/helpers/inference-process.js';
import { objectOnTexture } from '../test/helpers/synthetic-image.js';

const { values } = parseArgs({
  options: {
    image: { type: 'string' },
    runs: { type: 'string', default: '7' },
    json: { type: 'string' },
  },
});
const runs = Number(values.runs);
if (!Number.isInteger(runs) || runs < 5) throw new Error('--runs must be at least 5');

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};

const image = values.image ? await readFile(values.image) : (await objectOnTexture(1224, 816)).bytes;
const meta = await sharp(image).metadata();
const threads = os.availableParallelism();

// The product path: inference server process + Express app + handler.
const inference = await startInferenceProcess(['--threads', String(threads)]);
const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-bench-'));
const keyStore = new FileKeyStore({ file: path.join(dir, 'keys.json') });
const { key } = await keyStore.createKey({ accountId: 'bench', plan: 'bench' });
const handler = createRemoveBgHandler({
  keyStore,
  plans: { bench: { requestsPerMinute: 1_000_000 } },
  inference: { address: inference.address },
});
await handler.ready();
const server = createExpressApp(handler).listen(0, '127.0.0.1');
await new Promise((r) => server.once('listening', r));
const { port } = server.address() as { port: number };

// The baseline: the same model, same threads, called directly in this process.
const session = await ort.InferenceSession.create(await resolveModelFile('isnet-fp16'), {
  intraOpNumThreads: threads,
  interOpNumThreads: 1,
  executionMode: 'sequential',
  graphOptimizationLevel: 'all',
});
const modelRgb = await sharp(image).autoOrient().removeAlpha().resize(1024, 1024, { fit: 'fill' }).raw().toBuffer();
const feeds = { input: new ort.Tensor('float32', rgbToTensor(modelRgb, ISNET_PROFILE), [1, 3, 1024, 1024]) };

async function endToEnd(): Promise<{ ms: number; stages: Record<string, number> }> {
  const form = new FormData();
  form.append('file', new Blob([image], { type: 'image/jpeg' }), 'photo.jpg');
  const started = performance.now();
  const response = await fetch(`http://127.0.0.1:${port}/v1/remove-bg`, { method: 'POST', headers: { 'x-api-key': key }, body: form });
  await response.arrayBuffer();
  const ms = performance.now() - started;
  if (response.status !== 200) throw new Error(`HTTP ${response.status}`);
  const stages = Object.fromEntries(
    (response.headers.get('server-timing') ?? '').split(',').map((part) => {
      const [name, dur] = part.trim().split(';dur=');
      return [name!, Number(dur)];
    }),
  );
  return { ms, stages };
}

async function raw(): Promise<number> {
  const started = performance.now();
  await session.run(feeds, ['output']);
  return performance.now() - started;
}

// Warm both paths, then alternate them.
await endToEnd();
await raw();
const e2e: number[] = [];
const rawMs: number[] = [];
const stageSamples: Record<string, number[]> = {};
for (let i = 0; i < runs; i++) {
  const result = await endToEnd();
  e2e.push(result.ms);
  for (const [stage, ms] of Object.entries(result.stages)) (stageSamples[stage] ??= []).push(ms);
  (stageSamples.modelInfer ??= []).push((result.stages.inference ?? 0) + (result.stages.transfer ?? 0));
  rawMs.push(await raw());
}

const report = {
  image: { width: meta.width, height: meta.height, megapixels: Number((((meta.width ?? 0) * (meta.height ?? 0)) / 1e6).toFixed(2)), bytes: image.length, source: values.image ?? 'synthetic' },
  runs,
  threads,
  machine: `${os.cpus()[0]?.model ?? 'cpu'} x${os.cpus().length}`,
  medianMs: {
    endToEndHttp: median(e2e),
    modelInfer: median(stageSamples.modelInfer ?? []),
    rawSessionRun: median(rawMs),
    ...Object.fromEntries(Object.entries(stageSamples).filter(([s]) => s !== 'modelInfer').map(([s, xs]) => [`stage_${s}`, median(xs)])),
  },
  ratioEndToEndOverRaw: median(e2e) / median(rawMs),
  ratioModelInferOverRaw: median(stageSamples.modelInfer ?? []) / median(rawMs),
};

console.log(`\nbgcut latency, ${report.image.width}x${report.image.height} (${report.image.megapixels} MP, ${report.image.source}), ${runs} runs, ${threads} threads`);
console.log('| measure | median ms |');
console.log('|---|---|');
for (const [name, ms] of Object.entries(report.medianMs)) console.log(`| ${name} | ${ms.toFixed(1)} |`);
console.log(`| ratio end-to-end / raw session.run | ${report.ratioEndToEndOverRaw.toFixed(3)} |`);
console.log(`| ratio ModelInfer / raw session.run | ${report.ratioModelInferOverRaw.toFixed(3)} |`);
if (values.json) await writeFile(values.json, `${JSON.stringify(report, null, 2)}\n`);

server.close();
await handler.close();
await session.release();
await inference.stop();
process.exit(0);
