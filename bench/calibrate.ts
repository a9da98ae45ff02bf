/**
 * npm run calibrate -- <smoke folder> [--out src/inference-server/calibration/isnet-int8.json] [--no-flip] [--crops] [--chunk 16]
 *
 * Measures the activation ranges of ISNet (FP32 graph, prepared as served: 8-bit pixels in) on
 * the four ordinary photos of ../shared/smoke (MIT-licensed: photo_car, photo_car_small,
 * photo_person, photo_tiger), each also mirrored (and with --crops the object crops `best` makes
 * of them, found by the FP32 model itself, and their mirrors), and writes the table the 8-bit model is made
 * from at start-up. Only derived numbers are written (per tensor: extremes and a few
 * percentiles), never pixels. Never run it on the evaluation set: its figures must stay a test.
 *
 * Each tensor's values go into a histogram keyed by the float's top 16 bits (sign, exponent and
 * 7 mantissa bits: bins ~0.8% wide at any magnitude), so percentiles of every photo together
 * need neither a first pass for the range nor the values kept.
 */
import ort from 'onnxruntime-node';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import onnxProto from 'onnx-proto';
import sharp from 'sharp';
import { toFloat32 } from '../src/inference-server/float32-model.js';
import { BUILTIN_MODELS, preparedOptions, resolveModelFile } from '../src/inference-server/model-source.js';
import { prepareModel } from '../src/inference-server/prepare-model.js';
import { BEST_PASSES, objectCrop } from '../src/core/image/multi-pass.js';
import { activationTensors, type CalibrationTable } from '../src/inference-server/quantize-model.js';

const { onnx } = onnxProto;
const PHOTOS = ['photo_car.jpg', 'photo_car_small.jpg', 'photo_person.jpg', 'photo_tiger.jpg'];
const PERCENTILES = ['99.9', '99.99', '99.999', '0.1', '0.01', '0.001'];
const SIZE = 1024;

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    out: { type: 'string', default: fileURLToPath(new URL('../../src/inference-server/calibration/isnet-int8.json', import.meta.url)) },
    'no-flip': { type: 'boolean' },
    crops: { type: 'boolean' },
    chunk: { type: 'string', default: '16' },
    threads: { type: 'string', default: '2' },
  },
});
const folder = positionals[0];
if (!folder) {
  console.error('usage: npm run calibrate -- <smoke folder> [--out table.json] [--no-flip] [--chunk 16]');
  process.exit(2);
}
if (path.basename(path.resolve(folder)) === 'eval') throw new Error('never calibrate on the evaluation set');

// The source as served: FP16 ISNet widened to FP32, prepared (8-bit NHWC pixels in).
const sourceFile = await resolveModelFile('isnet-fp16');
const chunkListHash = /-([0-9a-f]{16})\.onnx$/.exec(sourceFile)![1]!;
const model = toFloat32(onnx.ModelProto.decode(await readFile(sourceFile)));
const prepared = onnx.ModelProto.decode(prepareModel(onnx.ModelProto.encode(model).finish(), preparedOptions('isnet-fp32')!).bytes);
const tensors = activationTensors(prepared);
console.error(`${tensors.length} activation tensors`);

// The pixels the server feeds: the photo resized to 1024x1024 (fill), 8-bit RGB, NHWC.
const inputs: { name: string; pixels: Uint8Array }[] = [];
for (const photo of PHOTOS) {
  const rgb = await sharp(path.join(folder, photo)).autoOrient().removeAlpha().resize(SIZE, SIZE, { fit: 'fill' }).raw().toBuffer();
  inputs.push({ name: photo, pixels: new Uint8Array(rgb) });
  if (!values['no-flip']) {
    const flipped = await sharp(path.join(folder, photo)).autoOrient().removeAlpha().flop().resize(SIZE, SIZE, { fit: 'fill' }).raw().toBuffer();
    inputs.push({ name: `${photo} (mirrored)`, pixels: new Uint8Array(flipped) });
  }
}

// The object crops `best` feeds the model (its box plus margin, blown up to 1024x1024), and
// their mirrors: objects seen larger than in any whole photo reach activations whole photos do
// not, and `best`'s crop passes are where the 8-bit model lost most (docs/model-int8.md).
if (values.crops) {
  const session = await ort.InferenceSession.create(onnx.ModelProto.encode(prepared).finish(), { intraOpNumThreads: Number(values.threads), graphOptimizationLevel: 'all' });
  for (const photo of PHOTOS) {
    const whole = inputs.find((i) => i.name === photo)!;
    const mask = (await session.run({ image: new ort.Tensor('uint8', whole.pixels, [1, SIZE, SIZE, 3]) }, ['mask'])).mask!.data as Uint8Array;
    const image = sharp(path.join(folder, photo)).autoOrient().removeAlpha();
    const { width, height } = await image.clone().toBuffer({ resolveWithObject: true }).then((r) => r.info);
    const region = objectCrop(Buffer.from(mask), SIZE, SIZE, width, height, BEST_PASSES.cropMargin, BEST_PASSES.cropMaxArea);
    if (!region) continue;
    for (const mirrored of [false, true]) {
      const crop = image.clone().extract(region);
      const rgb = await (mirrored ? crop.flop() : crop).resize(SIZE, SIZE, { fit: 'fill' }).raw().toBuffer();
      inputs.push({ name: `${photo} (object crop${mirrored ? ', mirrored' : ''})`, pixels: new Uint8Array(rgb) });
    }
  }
  await session.release();
}
console.error(`${inputs.length} images: ${inputs.map((i) => i.name).join(', ')}`);

const BINS = 1 << 16;
const stats = new Map<string, { min: number; max: number; hist: Float64Array }>();
const chunk = Number(values.chunk);
for (let at = 0; at < tensors.length; at += chunk) {
  const names = tensors.slice(at, at + chunk);
  // The same graph, with this chunk's tensors as extra outputs (a chunk at a time bounds memory).
  const graph = prepared.graph!;
  const saved = graph.output!;
  graph.output = [...saved, ...names.map((name) => ({ name }))];
  const bytes = onnx.ModelProto.encode(prepared).finish();
  graph.output = saved;
  const session = await ort.InferenceSession.create(bytes, { intraOpNumThreads: Number(values.threads), graphOptimizationLevel: 'all' });
  for (const input of inputs) {
    const result = await session.run({ image: new ort.Tensor('uint8', input.pixels, [1, SIZE, SIZE, 3]) }, names);
    for (const name of names) {
      const data = result[name]!.data as Float32Array;
      let entry = stats.get(name);
      if (!entry) stats.set(name, (entry = { min: Infinity, max: -Infinity, hist: new Float64Array(BINS) }));
      const bits = new Uint32Array(data.buffer, data.byteOffset, data.length);
      const hist = entry.hist;
      let min = entry.min;
      let max = entry.max;
      for (let i = 0; i < data.length; i++) {
        const v = data[i]!;
        if (v < min) min = v;
        if (v > max) max = v;
        hist[bits[i]! >>> 16]!++;
      }
      entry.min = min;
      entry.max = max;
    }
  }
  await session.release();
  console.error(`tensors ${at + names.length}/${tensors.length}`);
}

/** The value below which a share q (0..1) of all values fell, from the histogram (bin midpoints). */
function quantile(hist: Float64Array, q: number): number {
  // Value order: negative bins from the largest magnitude down, then positive bins upwards.
  const order: number[] = [];
  for (let b = BINS - 1; b >= BINS / 2; b--) order.push(b);
  for (let b = 0; b < BINS / 2; b++) order.push(b);
  const total = hist.reduce((a, c) => a + c, 0);
  let seen = 0;
  for (const b of order) {
    seen += hist[b]!;
    if (seen >= q * total) {
      const mid = new Float32Array(new Uint32Array([(b << 16) | 0x8000]).buffer)[0]!;
      return mid;
    }
  }
  return NaN;
}

const table: CalibrationTable = {
  source: { resource: BUILTIN_MODELS['isnet-fp16'], chunkListHash },
  inputSize: SIZE,
  photos: PHOTOS,
  augmentations: [...(values['no-flip'] ? [] : ['mirrored']), ...(values.crops ? ['object crops (best), and their mirrors'] : [])],
  tensors: {},
};
const round = (x: number) => Number(x.toPrecision(6));
for (const name of tensors) {
  const s = stats.get(name)!;
  const percentiles: Record<string, number> = {};
  // Clamped to the extremes seen (a bin's midpoint can lie beyond them).
  for (const p of PERCENTILES) percentiles[p] = round(Math.min(s.max, Math.max(s.min, quantile(s.hist, Number(p) / 100))));
  table.tensors[name] = { min: round(s.min), max: round(s.max), percentiles };
}
await writeFile(values.out!, `${JSON.stringify(table, null, 1)}\n`);
console.error(`wrote ${values.out} (${tensors.length} tensors, ${inputs.length} images)`);
