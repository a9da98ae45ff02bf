/**
 * npm run eval -- <folder> [--json] [--check quality/isnet-fp16.json] [--write quality/isnet-fp16.json]
 *                 [--model isnet-fp16] [--limit N] [--composites DIR]
 *
 * Cutout quality on pairs NAME.jpg|png + NAME.mask.png (8-bit grey, same size), through the same
 * pipeline the endpoint uses (probe, segment on a real inference server, render), reporting per
 * image and as means: IoU (alpha >= 128), alpha MAE (0..1), boundary F-measure, and time per
 * image. `dimcrop_*` pairs (crops where the object is cut by the frame) are reported apart from
 * whole-object pairs. `--check` fails (exit 1) when whole-object IoU drops by more than 0.01 or
 * MAE rises by more than 0.005 against the committed figures.
 */
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import sharp from 'sharp';
import { DEFAULT_OUTPUT, ISNET_PROFILE } from '../src/core/index.js';
import { InferenceClient } from '../src/core/inference/inference-client.js';
import { probeImage, segment } from '../src/core/image/pipeline.js';
import { renderOutput } from '../src/core/image/output.js';
import { startInferenceProcess } from '../test/helpers/inference-process.js';
import { score, type Scores } from './quality-metrics.js';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    json: { type: 'boolean' },
    check: { type: 'string' },
    write: { type: 'string' },
    model: { type: 'string', default: 'isnet-fp16' },
    limit: { type: 'string' },
    composites: { type: 'string' },
  },
});
const folder = positionals[0];
if (!folder) {
  console.error('usage: npm run eval -- <folder> [--json] [--check figures.json] [--write figures.json]');
  process.exit(2);
}

const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);

async function main(): Promise<number> {
  const files = (await readdir(folder!)).filter((f) => /\.mask\.png$/.test(f)).sort();
  const names = files.map((f) => f.replace(/\.mask\.png$/, '')).slice(0, values.limit ? Number(values.limit) : undefined);
  const all = await readdir(folder!);
  const server = await startInferenceProcess(['--model', values.model!]);
  const client = new InferenceClient({ address: server.address, timeoutMs: 60_000, maxMessageBytes: 64 << 20, retryAfterSeconds: 1 });
  const profile = ISNET_PROFILE;
  const model = async (input: Float32Array, signal: AbortSignal) => {
    const out = await client.infer('isnet', { name: profile.inputName, shape: [1, 3, profile.height, profile.width], data: input }, profile.outputName, signal);
    return { mask: out.data, serverRunMs: out.serverRunMs };
  };
  if (values.composites) await mkdir(values.composites, { recursive: true });

  const rows: { name: string; group: 'whole' | 'dimcrop'; ms: number; inferenceMs: number } & Scores[] = [] as never;
  try {
    for (const name of names) {
      const imageFile = all.find((f) => f.startsWith(`${name}.`) && !f.endsWith('.mask.png') && /\.(jpe?g|png)$/i.test(f));
      if (!imageFile) continue;
      const bytes = await readFile(path.join(folder!, imageFile));
      const started = performance.now();
      const probe = await probeImage(bytes, { maxInputPixels: 100_000_000 });
      const seg = await segment(bytes, probe, profile, model, { maxInputPixels: 100_000_000 }, new AbortController().signal);
      const rendered = await renderOutput(seg, DEFAULT_OUTPUT, { pngCompressionLevel: 4, maxOutputPixels: Infinity, foregroundEstimation: true });
      const ms = performance.now() - started;
      const truth = await sharp(path.join(folder!, `${name}.mask.png`)).extractChannel(0).raw().toBuffer({ resolveWithObject: true });
      if (truth.info.width !== seg.width || truth.info.height !== seg.height) throw new Error(`${name}: mask size differs from the image`);
      const scores = score(seg.alpha, truth.data, seg.width, seg.height);
      (rows as unknown as object[]).push({ name, group: name.startsWith('dimcrop_') ? 'dimcrop' : 'whole', ms, inferenceMs: seg.timings.inference ?? 0, ...scores });
      if (values.composites) {
        // The cutout over a red background, to look at edges and colour spill.
        await sharp(rendered.body).flatten({ background: '#d01818' }).jpeg().toFile(path.join(values.composites, `${name}.jpg`));
      }
      if (!values.json) process.stderr.write('.');
    }
  } finally {
    client.close();
    await server.stop();
  }

  const typed = rows as unknown as ({ name: string; group: 'whole' | 'dimcrop'; ms: number; inferenceMs: number } & Scores)[];
  const summarise = (group: 'whole' | 'dimcrop') => {
    const g = typed.filter((r) => r.group === group);
    return {
      count: g.length,
      iou: round(mean(g.map((r) => r.iou))),
      mae: round(mean(g.map((r) => r.mae))),
      boundaryF: round(mean(g.map((r) => r.boundaryF))),
      msPerImage: Math.round(mean(g.map((r) => r.ms))),
    };
  };
  const report = { model: values.model, wholeObject: summarise('whole'), dimcrop: summarise('dimcrop'), images: typed.map((r) => ({ ...r, iou: round(r.iou), mae: round(r.mae), boundaryF: round(r.boundaryF), ms: Math.round(r.ms), inferenceMs: Math.round(r.inferenceMs) })) };

  if (values.json) console.log(JSON.stringify(report, null, 2));
  else {
    console.log(`\n| image | IoU | alpha MAE | boundary F | ms |\n|---|---|---|---|---|`);
    for (const r of report.images) console.log(`| ${r.name} | ${r.iou.toFixed(3)} | ${r.mae.toFixed(4)} | ${r.boundaryF.toFixed(3)} | ${r.ms} |`);
    for (const [label, s] of [['whole-object mean', report.wholeObject], ['dimcrop mean', report.dimcrop]] as const) {
      console.log(`| **${label}** (${s.count}) | ${s.iou.toFixed(3)} | ${s.mae.toFixed(4)} | ${s.boundaryF.toFixed(3)} | ${s.msPerImage} |`);
    }
  }
  if (values.write) {
    await writeFile(values.write, `${JSON.stringify({ model: values.model, wholeObject: report.wholeObject, dimcrop: report.dimcrop }, null, 2)}\n`);
  }
  if (values.check) {
    const committed = JSON.parse(await readFile(values.check, 'utf8')) as { wholeObject: Scores };
    const iouDrop = committed.wholeObject.iou - report.wholeObject.iou;
    const maeRise = report.wholeObject.mae - committed.wholeObject.mae;
    const ok = iouDrop <= 0.01 && maeRise <= 0.005;
    console.log(
      `quality check against ${values.check}: IoU ${report.wholeObject.iou} (committed ${committed.wholeObject.iou}), ` +
        `MAE ${report.wholeObject.mae} (committed ${committed.wholeObject.mae}): ${ok ? 'ok' : 'REGRESSION'}`,
    );
    if (!ok) return 1;
  }
  return 0;
}

function round(x: number): number {
  return Math.round(x * 10000) / 10000;
}

process.exitCode = await main();
