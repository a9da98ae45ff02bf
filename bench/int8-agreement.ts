/**
 * npm run int8-agreement -- <smoke folder> [--recipe RANGE:KEEP]... [--size 1024]
 *
 * How closely 8-bit recipes follow the FP32 model, on the four MIT photos of ../shared/smoke
 * (the calibration photos; the evaluation set is never used to choose a recipe). A recipe is
 * `RANGE:KEEP`: RANGE is `minmax` or a percentile of the calibration table (`99.99`, `99.999`),
 * KEEP a regular expression over node names kept in float on top of the mask head, e.g.
 * `minmax:^/stage1d/` keeps the last decoder stage in float; `+concat` after RANGE shares each
 * Concat's scale with its inputs (QuantizeOptions.shareConcatScales), `+conv_in8` runs the first
 * convolution 8-bit on the pixels (QuantizeOptions.pixels) instead of in float, `+7bit` gives
 * every convolution 7-bit weights (QuantizeOptions.sevenBitWeights). For each recipe: the mask's IoU
 * (alpha >= 128), alpha MAE and boundary F against the FP32 model's mask, means over the photos,
 * and how many convolutions run 8-bit. The models are made in memory (nothing is cached).
 */
import ort from 'onnxruntime-node';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import onnxProto from 'onnx-proto';
import sharp from 'sharp';
import { toFloat32Bytes } from '../src/inference-server/float32-model.js';
import { ISNET_INT8, loadCalibrationTable, makeInt8Model } from '../src/inference-server/int8-model.js';
import { preparedOptions, resolveModelFile } from '../src/inference-server/model-source.js';
import { prepareModel } from '../src/inference-server/prepare-model.js';
import { score } from './quality-metrics.js';

const PHOTOS = ['photo_car.jpg', 'photo_car_small.jpg', 'photo_person.jpg', 'photo_tiger.jpg'];
const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { recipe: { type: 'string', multiple: true, default: ['minmax:'] }, size: { type: 'string', default: '1024' } },
});
const folder = positionals[0];
if (!folder) {
  console.error('usage: npm run int8-agreement -- <smoke folder> [--recipe RANGE:KEEP]...');
  process.exit(2);
}
const side = Number(values.size);
const source = await readFile(await resolveModelFile('isnet-fp16'));
const prepare = preparedOptions('isnet-int8')!;
const { table } = await loadCalibrationTable(ISNET_INT8.table);
const feeds = await Promise.all(
  PHOTOS.map(async (photo) => {
    const rgb = await sharp(path.join(folder, photo)).autoOrient().removeAlpha().resize(side, side, { fit: 'fill' }).raw().toBuffer();
    return { image: new ort.Tensor('uint8', new Uint8Array(rgb), [1, side, side, 3]) };
  }),
);
async function masks(bytes: Uint8Array): Promise<Uint8Array[]> {
  const session = await ort.InferenceSession.create(bytes, { intraOpNumThreads: 2, graphOptimizationLevel: 'all' });
  const out: Uint8Array[] = [];
  for (const feed of feeds) out.push((await session.run(feed)).mask!.data as Uint8Array);
  await session.release();
  return out;
}
const reference = await masks(prepareModel(toFloat32Bytes(source), prepare).bytes);
// Nodes a recipe may keep in float: the quantizable ones (shape arithmetic may not survive preparation).
const nodeNames = (onnxProto.onnx.ModelProto.decode(source).graph?.node ?? [])
  .filter((n) => ['Conv', 'MaxPool', 'Concat', 'Add', 'Resize'].includes(n.opType ?? '') && !/^\/side[2-6]\/|^\/Resize_(6|7|8|9|10)$/.test(n.name ?? ''))
  .map((n) => n.name ?? '');

console.log(`8-bit recipes against the FP32 model, ${PHOTOS.length} photos at ${side}x${side} (means)`);
console.log('| recipe | 8-bit convs | IoU | alpha MAE | boundary F | worst photo IoU |\n|---|---|---|---|---|---|');
for (const recipe of values.recipe!) {
  const [rangeAndFlags, keep = ''] = recipe.split(/:(.*)/s) as [string, string?];
  const [range, ...flags] = rangeAndFlags.split('+');
  const pattern = keep ? new RegExp(keep) : undefined;
  const base = ISNET_INT8.quantize.keepFloat.filter((n) => !(flags.includes('conv_in8') && n === '/conv_in/Conv'));
  const keepFloat = [...base, ...nodeNames.filter((n) => pattern?.test(n) && !base.includes(n))];
  const { bytes, report } = makeInt8Model(source, prepare, table, { range: range! === 'minmax' ? 'minmax' : { percentile: range! }, keepFloat, shareConcatScales: flags.includes('concat'), sevenBitWeights: flags.includes('7bit') });
  const got = await masks(bytes);
  const scores = got.map((m, i) => score(m, reference[i]!, side, side));
  const mean = (f: (s: (typeof scores)[number]) => number) => scores.reduce((a, s) => a + f(s), 0) / scores.length;
  console.log(
    `| ${recipe} | ${report.quantizedConvs} | ${mean((s) => s.iou).toFixed(4)} | ${mean((s) => s.mae).toFixed(4)} | ${mean((s) => s.boundaryF).toFixed(3)} | ${Math.min(...scores.map((s) => s.iou)).toFixed(4)} |`,
  );
}
