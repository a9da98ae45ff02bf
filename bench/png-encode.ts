/**
 * The fast PNG encoder alone (src/core/image/png-encoder.ts), on cutouts the API made: the RGBA
 * each file decodes to is encoded by each variant in turn, interleaved, and for each the wall
 * time and the process's CPU per encode (process.cpuUsage(): every thread, libuv's included) are
 * the medians, with the file's bytes against the whole encode's and whether it decodes (sharp) to
 * the same RGBA.
 *
 *   node dist/bench/png-encode.js --image cutout.png [--image more.png ...] [--runs 25] [--warmup 3] [--bands 2,3,4]
 *
 * Variants: `whole` (the encoder as shipped before this round: one pngSync on this thread),
 * `copy only` (@napi-rs/image's fromRgbaPixels alone: the copy it makes of the RGBA), the Sub and
 * Up filters (pngSync), one band through the async `png()` (a libuv thread: the hand-off alone),
 * and the banded encode in N bands (png-bands.ts).
 */
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import sharp from 'sharp';
import { bandRows, joinBands } from '../src/core/image/png-bands.js';
import { encodePngRgbaFast, encodePngRgbaFastInBands, pngBandsFor } from '../src/core/image/png-encoder.js';

const { values } = parseArgs({
  options: {
    image: { type: 'string', multiple: true, default: [] },
    runs: { type: 'string', default: '25' },
    warmup: { type: 'string', default: '3' },
    bands: { type: 'string', default: '2,3,4' },
  },
});
if (values.image.length === 0) throw new Error('--image cutout.png is required (a PNG the API made)');
const runs = Number(values.runs);
const warmup = Number(values.warmup);
const bandCounts = values.bands.split(',').map(Number);

interface Napi {
  Transformer: {
    fromRgbaPixels(input: Uint8Array, width: number, height: number): { pngSync(o: object): Buffer; png(o: object): Promise<Buffer> };
  };
}
const napi = createRequire(import.meta.url)('@napi-rs/image') as Napi;
const FAST = 1;
const SUB = 1;
const UP = 2;
const PAETH = 4;

type Variant = { name: string; encode: (rgba: Buffer, w: number, h: number) => Buffer | Promise<Buffer | null> | null; png: boolean };
const variants: Variant[] = [
  { name: 'whole (pngSync, Paeth)', encode: (rgba, w, h) => encodePngRgbaFast(rgba, w, h), png: true },
  { name: 'copy only (fromRgbaPixels)', encode: (rgba, w, h) => (napi.Transformer.fromRgbaPixels(rgba, w, h), null), png: false },
  { name: 'pngSync, Sub', encode: (rgba, w, h) => napi.Transformer.fromRgbaPixels(rgba, w, h).pngSync({ compressionType: FAST, filterType: SUB }), png: true },
  { name: 'pngSync, Up', encode: (rgba, w, h) => napi.Transformer.fromRgbaPixels(rgba, w, h).pngSync({ compressionType: FAST, filterType: UP }), png: true },
  { name: 'async png(), 1 band', encode: (rgba, w, h) => napi.Transformer.fromRgbaPixels(rgba, w, h).png({ compressionType: FAST, filterType: PAETH }), png: true },
  ...bandCounts.map((n) => ({ name: `in ${n} bands`, encode: async (rgba: Buffer, w: number, h: number) => (await encodePngRgbaFastInBands(rgba, w, h, n))?.png ?? null, png: true })),
  // The bands one after another on this thread: its wall time is their total work; `slowest band +
  // join` (printed in the wall column's brackets) is the wall time with a core per band.
  ...bandCounts.map((n) => ({ name: `in ${n} bands, one after another`, encode: (rgba: Buffer, w: number, h: number) => bandsInTurn(rgba, w, h, n), png: true })),
];

/** Each band's time and the join's, of the last bandsInTurn call. */
let lastTurns = { slowest: 0, join: 0 };
async function bandsInTurn(rgba: Buffer, width: number, height: number, n: number): Promise<Buffer | null> {
  const bands = pngBandsFor(width, height, n);
  const rows = bandRows(height, bands);
  const times: number[] = [];
  const pngs = rows.map(([start, end]) => {
    const t0 = performance.now();
    const png = napi.Transformer.fromRgbaPixels(rgba.subarray(start * width * 4, end * width * 4), width, end - start).pngSync({ compressionType: FAST, filterType: PAETH });
    times.push(performance.now() - t0);
    return png;
  });
  const t0 = performance.now();
  const joined = bands > 1 ? joinBands(pngs, rows, width * 4) : pngs[0]!;
  lastTurns = { slowest: Math.max(...times), join: performance.now() - t0 };
  return joined;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
console.log(`load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}, UV_THREADPOOL_SIZE ${process.env.UV_THREADPOOL_SIZE ?? '(4)'}, ${os.availableParallelism()} cores`);
console.log('| cutout | variant | wall ms | CPU ms | bytes (vs whole) | same pixels |\n|---|---|---|---|---|---|');
for (const file of values.image) {
  const { data, info } = await sharp(file).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  const { width, height } = info;
  const wall = variants.map(() => [] as number[]);
  const cpu = variants.map(() => [] as number[]);
  const bytes: number[] = variants.map(() => 0);
  const same: string[] = variants.map(() => '');
  const critical = variants.map(() => [] as number[]);
  for (let r = 0; r < warmup + runs; r++) {
    for (let v = 0; v < variants.length; v++) {
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      const out = await variants[v]!.encode(data, width, height);
      const t1 = performance.now();
      const c1 = process.cpuUsage(c0);
      if (r >= warmup) {
        wall[v]!.push(t1 - t0);
        cpu[v]!.push((c1.user + c1.system) / 1000);
        if (variants[v]!.name.endsWith('one after another')) critical[v]!.push(lastTurns.slowest + lastTurns.join);
      }
      if (r === 0 && out && variants[v]!.png) {
        bytes[v] = out.length;
        same[v] = (await sharp(out).ensureAlpha().raw().toBuffer()).equals(data) ? 'yes' : '**no**';
      }
    }
  }
  variants.forEach((v, i) => {
    const ratio = bytes[i] ? ` (${(bytes[i]! / bytes[0]!).toFixed(4)})` : '';
    const estimate = critical[i]!.length ? ` (slowest band + join ${median(critical[i]!).toFixed(2)})` : '';
    console.log(`| ${path.basename(file)} ${width}x${height} | ${v.name} | ${median(wall[i]!).toFixed(2)}${estimate} | ${median(cpu[i]!).toFixed(2)} | ${bytes[i] || ''}${ratio} | ${same[i]} |`);
  });
}
console.log(`load average at the end ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
