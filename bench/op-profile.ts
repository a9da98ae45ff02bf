/**
 * npm run op-profile -- [--model isnet-int8] [--image photo.jpg] [--runs 3] [--threads 2] [--json out.json]
 *
 * Where one session.run of a model spends its time, by operator type, from ONNX Runtime's own
 * profiler (the last of --runs runs; the first ones warm up), and which operators the session
 * really runs once its graph optimizations are applied (graphOptimizationLevel 'all', as the
 * server opens it): the optimized graph is written to a temporary file and its operators
 * counted. This is how to check that QuantizeLinear/DequantizeLinear pairs were fused into
 * QLinearConv, and to see why a model is slow.
 */
import ort from 'onnxruntime-node';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import onnxProto from 'onnx-proto';
import sharp from 'sharp';
import { resolveModelFile } from '../src/inference-server/model-source.js';
import { objectOnTexture } from '../test/helpers/synthetic-image.js';

const { values } = parseArgs({
  options: {
    model: { type: 'string', default: 'isnet-int8' },
    image: { type: 'string' },
    runs: { type: 'string', default: '3' },
    threads: { type: 'string', default: String(os.availableParallelism()) },
    json: { type: 'boolean' },
  },
});

const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-op-profile-'));
try {
  const file = await resolveModelFile(values.model!);
  const optimized = path.join(dir, 'optimized.onnx');
  const session = await ort.InferenceSession.create(file, {
    intraOpNumThreads: Number(values.threads),
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
    optimizedModelFilePath: optimized,
    enableProfiling: true,
    profileFilePrefix: path.join(dir, 'profile'),
  });
  const meta = session.inputMetadata[0]!;
  if (!meta.isTensor) throw new Error('the model input is not a tensor');
  const image = values.image ? await readFile(values.image) : (await objectOnTexture(1600, 1200)).bytes;
  // Prepared models take 8-bit NHWC pixels; ISNet as shipped FP32 NCHW (pixel / 255 - 0.5).
  const nhwc = meta.type === 'uint8';
  const side = 1024;
  const rgb = await sharp(image).removeAlpha().resize(side, side, { fit: 'fill' }).raw().toBuffer();
  let feed: ort.Tensor;
  if (nhwc) feed = new ort.Tensor('uint8', new Uint8Array(rgb), [1, side, side, 3]);
  else {
    const planar = new Float32Array(3 * side * side);
    for (let i = 0; i < side * side; i++) for (let c = 0; c < 3; c++) planar[c * side * side + i] = rgb[i * 3 + c]! / 255 - 0.5;
    feed = new ort.Tensor('float32', planar, [1, 3, side, side]);
  }
  const runMs: number[] = [];
  for (let i = 0; i < Number(values.runs); i++) {
    const started = performance.now();
    await session.run({ [meta.name]: feed });
    runMs.push(performance.now() - started);
  }
  session.endProfiling();
  await session.release();

  // The profile holds every run; only the last one counts (the others warm up).
  const profileFile = (await readdir(dir)).find((f) => f.startsWith('profile'))!;
  const events = JSON.parse(await readFile(path.join(dir, profileFile), 'utf8')) as { cat: string; name: string; dur: number; ts: number; args?: { op_name?: string } }[];
  const runs = events.filter((e) => e.cat === 'Session' && e.name === 'model_run');
  const last = runs[runs.length - 1]!;
  const byOp = new Map<string, { ms: number; count: number }>();
  for (const e of events) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time') || e.ts < last.ts) continue;
    const op = e.args?.op_name ?? '?';
    const entry = byOp.get(op) ?? { ms: 0, count: 0 };
    entry.ms += e.dur / 1000;
    entry.count++;
    byOp.set(op, entry);
  }
  const model = onnxProto.onnx.ModelProto.decode(await readFile(optimized));
  const graphOps = new Map<string, number>();
  for (const n of model.graph?.node ?? []) {
    const op = n.domain && n.domain !== 'ai.onnx' ? `${n.domain}.${n.opType}` : n.opType!;
    graphOps.set(op, (graphOps.get(op) ?? 0) + 1);
  }
  const total = [...byOp.values()].reduce((a, b) => a + b.ms, 0);
  const rows = [...byOp.entries()].sort((a, b) => b[1].ms - a[1].ms);
  const report = {
    model: values.model,
    threads: Number(values.threads),
    runMs: runMs.map((ms) => Math.round(ms)),
    kernelMs: Math.round(total),
    byOp: Object.fromEntries(rows.map(([op, s]) => [op, { ms: Math.round(s.ms), share: Number((s.ms / total).toFixed(3)), nodes: s.count }])),
    optimizedGraph: Object.fromEntries([...graphOps.entries()].sort((a, b) => b[1] - a[1])),
  };
  if (values.json) console.log(JSON.stringify(report, null, 2));
  else {
    console.log(`${values.model}: session.run ${report.runMs.join(', ')} ms (${values.threads} threads); last run, kernel time ${report.kernelMs} ms by operator:`);
    console.log('| operator | ms | share | nodes |\n|---|---|---|---|');
    for (const [op, s] of rows) console.log(`| ${op} | ${Math.round(s.ms)} | ${((s.ms / total) * 100).toFixed(1)}% | ${s.count} |`);
    console.log(`optimized graph: ${[...graphOps.entries()].map(([op, n]) => `${op} ${n}`).join(', ')}`);
  }
} finally {
  await rm(dir, { recursive: true, force: true });
}
