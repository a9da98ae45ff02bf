/**
 * The width-only reduce of the model input alone, sharp's raw pipeline against lanczos-reduce.ts
 * (SIMD and the JavaScript reference), interleaved, checking the bytes are the same each run:
 *
 *   node dist/bench/lanczos-reduce.js [--image /tmp/h26e-1mp.jpg] [--width 1024] [--runs 40]
 *
 * The photo is decoded once to raw RGB; each run reduces it to `width` wide, its height kept.
 */
import { parseArgs } from 'node:util';
import sharp from 'sharp';
import { reduceHorizontal } from '../src/core/image/lanczos-reduce.js';

const { values } = parseArgs({ options: { image: { type: 'string', default: '/tmp/h26e-1mp.jpg' }, width: { type: 'string', default: '1024' }, runs: { type: 'string', default: '40' } } });
const { data, info } = await sharp(values.image).removeAlpha().toColourspace('srgb').raw().toBuffer({ resolveWithObject: true });
const [w, h, ow, runs] = [info.width, info.height, Number(values.width), Number(values.runs)];
const times: Record<'sharp' | 'simd' | 'js', number[]> = { sharp: [], simd: [], js: [] };
const median = (a: number[]) => [...a].sort((x, y) => x - y)[a.length >> 1]!;
for (let i = 0; i < runs + 3; i++) {
  let t = performance.now();
  const expected = await sharp(data, { raw: { width: w, height: h, channels: 3 } }).resize(ow, h, { fit: 'fill' }).raw().toBuffer();
  const ts = performance.now() - t;
  t = performance.now();
  const simd = reduceHorizontal(data, w, h, 3, ow);
  const tm = performance.now() - t;
  // The JavaScript loop every 5th run (it is slow).
  t = performance.now();
  const js = i % 5 === 0 ? reduceHorizontal(data, w, h, 3, ow, { simd: false }) : null;
  const tj = performance.now() - t;
  if (!simd.equals(expected) || (js && !js.equals(expected))) throw new Error('lanczos-reduce differs from sharp');
  if (i < 3) continue;
  times.sharp.push(ts);
  times.simd.push(tm);
  if (js) times.js.push(tj);
}
const [s, m, j] = [median(times.sharp), median(times.simd), median(times.js)];
console.log(`reduce ${w}x${h} -> ${ow}x${h}, medians of ${runs}: sharp ${s.toFixed(2)} ms, SIMD ${m.toFixed(2)} ms (sharp/SIMD ${(s / m).toFixed(2)}x), JavaScript ${j.toFixed(2)} ms (${times.js.length} runs); identical bytes`);
