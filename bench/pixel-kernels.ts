/**
 * The pixel worker's per-request kernels alone, in CPU ms (process.cpuUsage around each call),
 * medians of interleaved runs, on real photos and the model's real mask for each: the
 * JavaScript loops (the reference) against their WebAssembly SIMD versions, side by side in one
 * process. Every SIMD result is checked byte-identical to the JavaScript's before timing.
 *
 *   node dist/bench/pixel-kernels.js --image a.jpg [--image b.jpg ...] [--runs 40] [--model isnet-int8] [--save-masks DIR]
 *
 * The mask is the model's answer (run here in a worker thread, as the raw baseline of
 * bench/index.ts runs it) for the photo resized to the model's 1024x1024; the full-size alpha the
 * later kernels read is its upscale, as a render makes it.
 */
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import sharp from 'sharp';
import { ISNET_PROFILE } from '../src/core/image/profile.js';
import { inputShape } from '../src/core/image/profile.js';
import { estimateForeground, softBounds } from '../src/core/image/foreground.js';
import { composeOpaque, composeRgba, foregroundBox } from '../src/core/image/output.js';
import { pasteBlended, splitAlpha } from '../src/core/image/full-size-mask.js';
import { imageToTensor, upscaleMask } from '../src/core/image/tensor.js';
import { resolveModelFile } from '../src/inference-server/model-source.js';
import { SessionPool } from '../src/inference-server/session-pool.js';

const { values } = parseArgs({
  options: {
    image: { type: 'string', multiple: true },
    runs: { type: 'string', default: '40' },
    model: { type: 'string', default: 'isnet-int8' },
    /** Also write each photo's model-size mask there (<photo>.mask, 1024x1024 bytes), for profiling. */
    'save-masks': { type: 'string' },
  },
});
if (!values.image?.length) throw new Error('usage: pixel-kernels --image photo.jpg [--image ...] [--runs 40] [--model isnet-int8]');
const runs = Number(values.runs);
const profile = ISNET_PROFILE;

function cpuMs(run: () => void): number {
  const start = process.cpuUsage();
  run();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1000;
}
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/** Medians of `runs` interleaved calls of each variant (after `runs / 4` unmeasured ones each). */
function sideBySide(variants: Record<string, () => void>): Record<string, number> {
  const times: Record<string, number[]> = {};
  const names = Object.keys(variants);
  for (let i = 0; i < Math.ceil(runs / 4); i++) for (const name of names) variants[name]!();
  for (let i = 0; i < runs; i++) {
    // Alternate which goes first, so neither always runs right after the other.
    for (const name of i % 2 ? names : [...names].reverse()) (times[name] ??= []).push(cpuMs(variants[name]!));
  }
  return Object.fromEntries(names.map((n) => [n, median(times[n]!)]));
}

const pool = new SessionPool({ modelFile: await resolveModelFile(values.model!), providers: ['cpu'], workers: 1, intraOpThreads: 2, maxQueue: 1 });
await pool.start();
const rows: string[] = [];
/** The last estimateForeground call's CPU ms, the decode's copy before it left out. */
let lastFg = 0;
for (const file of values.image) {
  const bytes = await readFile(file);
  const { data: rgb, info } = await sharp(bytes).autoOrient().removeAlpha().raw().toBuffer({ resolveWithObject: true });
  const { width, height } = info;
  const modelRgb = await sharp(rgb, { raw: { width, height, channels: 3 } }).resize(profile.width, profile.height, { fit: 'fill' }).raw().toBuffer();
  const tensor = imageToTensor(modelRgb, profile);
  const data = tensor.buffer.slice(tensor.byteOffset, tensor.byteOffset + tensor.byteLength) as ArrayBuffer;
  const { outputs } = await pool.run([{ name: profile.inputName, datatype: 'UINT8', shape: inputShape(profile), data }], [profile.outputName]);
  const grey = Buffer.from(outputs[0]!.data);
  if (values['save-masks']) await writeFile(`${values['save-masks']}/${path.basename(file)}.mask`, grey);
  const { width: mw, height: mh } = profile;
  const label = `${path.basename(file)} ${width}x${height}`;

  // The full-size mask, into a kept buffer as a render makes it (output.ts's maskScratch).
  const kept = Buffer.alloc(width * height);
  const js = upscaleMask(grey, mw, mh, width, height, undefined, { simd: false });
  if (!upscaleMask(grey, mw, mh, width, height, kept).equals(js)) throw new Error(`${label}: upscaleMask SIMD differs from JS`);
  const up = sideBySide({
    js: () => upscaleMask(grey, mw, mh, width, height, kept, { simd: false }),
    simd: () => upscaleMask(grey, mw, mh, width, height, kept),
  });
  rows.push(`| ${label} | upscaleMask (1024x1024 → full size) | ${up.js!.toFixed(2)} | ${up.simd!.toFixed(2)} | ${(up.simd! / up.js!).toFixed(2)} |`);

  // Foreground estimation on the real alpha, from the model-size view as the render gets it, on a
  // copy of the decode each call (the copy made before the timed call).
  const alpha = js;
  const view = { rgb: modelRgb, alpha: grey, width: mw, height: mh };
  const work = Buffer.alloc(rgb.length);
  const fgVariants: Record<string, () => void> = {};
  for (const simd of [false, true]) {
    fgVariants[simd ? 'simd' : 'js'] = () => {
      rgb.copy(work);
      const started = process.cpuUsage();
      void estimateForeground(work, alpha, width, height, view, 'band', { simd });
      const used = process.cpuUsage(started);
      lastFg = (used.user + used.system) / 1000;
    };
  }
  const fgJs = Buffer.from(rgb);
  await estimateForeground(fgJs, alpha, width, height, view, 'band', { simd: false });
  const fgSimd = Buffer.from(rgb);
  await estimateForeground(fgSimd, alpha, width, height, view, 'band', { simd: true });
  if (!fgSimd.equals(fgJs)) throw new Error(`${label}: estimateForeground SIMD differs from JS`);
  const fg = { js: [] as number[], simd: [] as number[] };
  for (let i = 0; i < Math.ceil(runs / 4); i++) for (const v of Object.values(fgVariants)) v();
  for (let i = 0; i < runs; i++) {
    for (const name of (i % 2 ? ['js', 'simd'] : ['simd', 'js']) as ('js' | 'simd')[]) {
      fgVariants[name]!();
      fg[name].push(lastFg);
    }
  }
  const fgJsMs = median(fg.js);
  const fgSimdMs = median(fg.simd);
  rows.push(`| ${label} | estimateForeground (from the model-size view) | ${fgJsMs.toFixed(2)} | ${fgSimdMs.toFixed(2)} | ${(fgSimdMs / fgJsMs).toFixed(2)} |`);

  // The render's other full-size kernels (render-compose.wat), each checked byte-identical first:
  // the RGBA compose of a PNG cutout, the compose over a colour (JPEG), the two boxes, an RGBA
  // input's alpha folded in (on the photo with a made-up alpha), best's crop merge (a crop of
  // 60 x 70 % of the photo with a 10 % ramp, the model's mask as the crop's).
  const rgba = Buffer.alloc(width * height * 4);
  const colour = { r: 30, g: 144, b: 255, alpha: 1 };
  const opaqueOut = Buffer.alloc(width * height * 3);
  const withAlpha = Buffer.alloc(width * height * 4);
  for (let i = 0; i < width * height; i++) {
    fgJs.copy(withAlpha, i * 4, i * 3, i * 3 + 3);
    withAlpha[i * 4 + 3] = (i * 7) & 255;
  }
  const maskCopy = Buffer.alloc(width * height);
  const region = { left: Math.floor(width * 0.2), top: Math.floor(height * 0.15), width: Math.floor(width * 0.6), height: Math.floor(height * 0.7) };
  const part = upscaleMask(grey, mw, mh, region.width, region.height);
  const ramp = Math.max(region.width, region.height) * 0.1;
  const kernels: Record<string, { label: string; run: (simd: boolean) => Buffer }> = {
    composeRgba: { label: 'composeRgba (into a kept buffer)', run: (simd) => composeRgba(fgJs, alpha, null, rgba, { simd }) },
    composeOpaque: { label: 'composeOpaque (over a colour, into a kept buffer)', run: (simd) => composeOpaque(fgJs, alpha, colour, opaqueOut, { simd }) },
    translucent: { label: 'composeRgba over a translucent colour (alpha 0.5)', run: (simd) => composeRgba(fgJs, alpha, { ...colour, alpha: 0.5 }, rgba, { simd }) },
    foregroundBox: { label: 'foregroundBox', run: (simd) => Buffer.from(JSON.stringify(foregroundBox(alpha, width, height, { simd }))) },
    softBounds: { label: 'softBounds', run: (simd) => Buffer.from(JSON.stringify(softBounds(alpha, width, height, undefined, { simd }))) },
    splitAlpha: {
      label: 'splitAlpha (an RGBA input; the mask copied first)',
      run: (simd) => {
        alpha.copy(maskCopy);
        return Buffer.concat([splitAlpha(withAlpha, maskCopy, { simd }), maskCopy]);
      },
    },
    pasteBlended: { label: `pasteBlended replace (${region.width}x${region.height} crop)`, run: (simd) => pasteBlended(alpha, width, height, part, region, ramp, 'replace', 1, { simd }) },
  };
  for (const [name, kernel] of Object.entries(kernels)) {
    if (!kernel.run(true).equals(kernel.run(false))) throw new Error(`${label}: ${name} SIMD differs from JS`);
    const t = sideBySide({ js: () => void kernel.run(false), simd: () => void kernel.run(true) });
    rows.push(`| ${label} | ${kernel.label} | ${t.js!.toFixed(2)} | ${t.simd!.toFixed(2)} | ${(t.simd! / t.js!).toFixed(2)} |`);
  }
}
await pool.close();
console.log(`pixel kernels, CPU ms per call, medians of ${runs} interleaved (SIMD results checked byte-identical first)`);
console.log('| image | kernel | JavaScript | WebAssembly SIMD | SIMD / JS |\n|---|---|---|---|---|');
for (const row of rows) console.log(row);
