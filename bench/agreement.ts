/**
 * npm run agreement -- <folder> [--variants isnet,isnet-u16] [--limit N] [--json FILE]
 *
 * Does the prepared model cut out what ISNet as shipped does? Runs every image of <folder>
 * (pairs NAME.jpg|png + NAME.mask.png, as `npm run eval` reads them) through the same pipeline
 * (probe, segment on a real inference server, the same post-processing) once with the FP32
 * reference (`isnet-fp16`, FP32 NCHW in, FP32 out) and once per variant, then reports per
 * variant: the largest per-pixel alpha difference at full size (in 1/255), the share of pixels
 * that differ at all, the quality scores against the ground truth side by side, and the bytes
 * each ModelInfer call sends and receives.
 */
import { readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import sharp from 'sharp';
import { ISNET_FP32_PROFILE, ISNET_PROFILE, type PreprocessingProfile } from '../src/core/index.js';
import { InferenceClient } from '../src/core/inference/inference-client.js';
import { tensorOf } from '../src/core/image/model-input.js';
import { fullSizeAlpha, probeImage, segment, type MaskModel } from '../src/core/image/pipeline.js';
import { PixelPool } from '../src/core/image/pixel-pool.js';
import { upscaleMask } from '../src/core/image/tensor.js';
import { startInferenceProcess } from '../test/helpers/inference-process.js';
import { score, type Scores } from './quality-metrics.js';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { variants: { type: 'string', default: 'isnet,isnet-u16' }, limit: { type: 'string' }, json: { type: 'string' } },
});
const folder = positionals[0];
if (!folder) {
  console.error('usage: npm run agreement -- <folder> [--variants isnet,isnet-u16] [--limit N] [--json FILE]');
  process.exit(2);
}

const PROFILES: Record<string, PreprocessingProfile> = {
  'isnet-fp16': ISNET_FP32_PROFILE,
  isnet: ISNET_PROFILE,
  'isnet-u16': { ...ISNET_PROFILE, outputDatatype: 'UINT16', minMaxNormalize: true },
};

interface Row {
  name: string;
  width: number;
  height: number;
  grey: Buffer;
  scores: Scores;
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const all = await readdir(folder);
const names = all
  .filter((f) => f.endsWith('.mask.png'))
  .map((f) => f.replace(/\.mask\.png$/, ''))
  .sort()
  .slice(0, values.limit ? Number(values.limit) : undefined);

async function run(variant: string): Promise<{ rows: Row[]; bytesSent: number; bytesReceived: number; medianInferenceMs: number }> {
  const profile = PROFILES[variant];
  if (!profile) throw new Error(`unknown variant ${variant} (${Object.keys(PROFILES).join(', ')})`);
  const server = await startInferenceProcess(['--model', variant]);
  const client = new InferenceClient({ address: server.address, timeoutMs: 120_000, maxMessageBytes: 64 << 20, retryAfterSeconds: 1 });
  let bytesSent = 0;
  let bytesReceived = 0;
  const inference: number[] = [];
  const base = client.maskModel('isnet', profile);
  // The same model call, counting the tensor bytes that cross the wire.
  const model: MaskModel = async (input, signal) => {
    const out = await base(input, signal);
    bytesSent = tensorOf(input).byteLength;
    bytesReceived = out.mask.byteLength;
    return out;
  };
  const rows: Row[] = [];
  const pixelPool = new PixelPool();
  try {
    for (const name of names) {
      const file = all.find((f) => f.startsWith(`${name}.`) && !f.endsWith('.mask.png') && /\.(jpe?g|png)$/i.test(f));
      if (!file) continue;
      const bytes = await readFile(path.join(folder!, file));
      const limits = { maxInputPixels: 100_000_000 };
      const probe = await probeImage(bytes, limits);
      const seg = await segment(bytes, probe, profile, model, limits, new AbortController().signal, false);
      inference.push(seg.timings.inference ?? 0);
      const truth = await sharp(path.join(folder!, `${name}.mask.png`)).extractChannel(0).raw().toBuffer();
      rows.push({ name, width: seg.width, height: seg.height, grey: Buffer.from(seg.model.alpha), scores: score(await fullSizeAlpha(seg, pixelPool), truth, seg.width, seg.height) });
      process.stderr.write('.');
    }
  } finally {
    await pixelPool.close();
    client.close();
    await server.stop();
  }
  inference.sort((a, b) => a - b);
  return { rows, bytesSent, bytesReceived, medianInferenceMs: inference[Math.floor(inference.length / 2)] ?? NaN };
}

const reference = await run('isnet-fp16');
const report: Record<string, unknown> = {};
const summary = (rows: Row[]) => {
  const whole = rows.filter((r) => !r.name.startsWith('dimcrop_'));
  return { iou: mean(whole.map((r) => r.scores.iou)), mae: mean(whole.map((r) => r.scores.mae)), boundaryF: mean(whole.map((r) => r.scores.boundaryF)) };
};
report['isnet-fp16'] = { ...summary(reference.rows), bytesSent: reference.bytesSent, bytesReceived: reference.bytesReceived, medianInferenceMs: reference.medianInferenceMs };
for (const variant of values.variants!.split(',').filter(Boolean)) {
  const result = await run(variant);
  let maxDiff = 0;
  let differing = 0;
  let pixels = 0;
  let worst = '';
  for (const row of result.rows) {
    const ref = reference.rows.find((r) => r.name === row.name)!;
    // The same post-processing for both: the model-size grey mask upscaled to the image's size.
    const a = upscaleMask(ref.grey, 1024, 1024, ref.width, ref.height);
    const b = upscaleMask(row.grey, 1024, 1024, row.width, row.height);
    for (let i = 0; i < a.length; i++) {
      const d = Math.abs(a[i]! - b[i]!);
      if (d > 0) differing++;
      if (d > maxDiff) {
        maxDiff = d;
        worst = row.name;
      }
    }
    pixels += a.length;
  }
  report[variant] = {
    ...summary(result.rows),
    maxAlphaDiff255: maxDiff,
    worstImage: worst,
    differingPixelsPercent: (differing / pixels) * 100,
    bytesSent: result.bytesSent,
    bytesReceived: result.bytesReceived,
    medianInferenceMs: result.medianInferenceMs,
  };
}
console.log(`\n${names.length} images from ${folder}; reference isnet-fp16 (FP32 in and out)`);
console.table(report);
if (values.json) await writeFile(values.json, `${JSON.stringify(report, null, 2)}\n`);
