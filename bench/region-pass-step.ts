/**
 * `best`'s region pass input step alone, in CPU ms (process.cpuUsage around each call: every
 * thread, libvips's too), medians over interleaved runs, on a real photo: the upload decoded,
 * turned upright, the region cut out and resized to the model's input. Three variants side by
 * side: the floor (decode and extract only, no resize), sharp's one-call resize (what the pass did
 * for an EXIF-turned photo before), and this build's preparePassInputs (sharp reduces, enlargeBicubic
 * grows: fill-resize.ts). The two resized variants' bytes are checked equal before timing.
 *
 *   node dist/bench/region-pass-step.js --image photo.jpg [--orientation 6] [--region left,top,width,height] [--runs 25]
 *
 * `--orientation` writes that EXIF orientation into the photo first (sharp's withMetadata); the
 * default region is the middle two thirds across and three quarters down of the upright image,
 * about what `best`'s object crop takes of a centred subject.
 */
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import sharp from 'sharp';
import { preparePassInputs } from '../src/core/image/multi-pass.js';
import { openDecoder, probeImage } from '../src/core/image/pipeline.js';
import { ISNET_PROFILE } from '../src/core/image/profile.js';

const { values } = parseArgs({
  options: { image: { type: 'string' }, orientation: { type: 'string' }, region: { type: 'string' }, runs: { type: 'string', default: '25' } },
});
if (!values.image) throw new Error('--image is required');
const runs = Number(values.runs);
const original = await readFile(values.image);
const bytes = values.orientation ? await sharp(original).withMetadata({ orientation: Number(values.orientation) }).toBuffer() : original;
const limits = { maxInputPixels: 100e6 };
const probe = await probeImage(bytes, limits);
const [left, top, width, height] = values.region
  ? values.region.split(',').map(Number)
  : [Math.floor(probe.width / 6), Math.floor(probe.height / 8), Math.floor((probe.width * 2) / 3), Math.floor((probe.height * 3) / 4)];
const region = { left: left!, top: top!, width: width!, height: height! };
const { width: w, height: h } = ISNET_PROFILE;
const opaque = () => (probe.hasAlpha ? openDecoder(bytes, limits).flatten({ background: '#ffffff' }) : openDecoder(bytes, limits).removeAlpha());

const variants: [string, () => Promise<Buffer>][] = [
  ['floor: decode + extract', () => opaque().extract(region).raw().toBuffer()],
  ["sharp's one call", () => opaque().extract(region).resize(w, h, { fit: 'fill' }).raw({ depth: 'uchar' }).toBuffer()],
  ['this build', async () => (await preparePassInputs({ profile: ISNET_PROFILE, source: { bytes, probe, limits, region }, plain: false, mirror: false })).rgb],
];
if (!(await variants[1]![1]()).equals(await variants[2]![1]())) throw new Error("this build's region pass differs from sharp's one call");

async function cpuMs(run: () => Promise<unknown>): Promise<number> {
  const start = process.cpuUsage();
  await run();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1000;
}
const median = (list: number[]) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)]!;

const times = variants.map(() => [] as number[]);
for (let r = 0; r < runs; r++) for (let v = 0; v < variants.length; v++) times[v]!.push(await cpuMs(variants[v]![1]));
const floor = median(times[0]!);
console.log(`${values.image}, EXIF orientation ${probe.orientation ?? 1}, upright ${probe.width}x${probe.height}, region ${region.width}x${region.height} at ${region.left},${region.top} -> ${w}x${h}; CPU ms, medians of ${runs}`);
console.log('| variant | CPU ms | above the floor |');
console.log('|---|---|---|');
variants.forEach(([name], v) => console.log(`| ${name} | ${median(times[v]!).toFixed(1)} | ${(median(times[v]!) - floor).toFixed(1)} |`));
