/**
 * The resize step alone, in CPU ms (process.cpuUsage around each call: every thread, libvips's
 * too), medians over interleaved runs: sharp's one-call `fit: 'fill'` resize against the shipped
 * split (sharp reduces the shrinking axis, enlargeBicubic grows the rest), and optionally the
 * split of another build's bicubic-enlarge.js (`--before <file>`) in the same run, so the figures
 * compare side by side. Each variant's bytes are checked equal to sharp's before timing.
 *
 *   node dist/bench/enlarge-step.js [--runs 25] [--before /path/to/bicubic-enlarge.js]
 *
 * Inputs are generated (noise, gradients and edges in equal parts): the step's cost depends on
 * the sizes, not on the content.
 */
import { pathToFileURL } from 'node:url';
import sharp from 'sharp';
import { enlargeBicubic } from '../src/core/image/bicubic-enlarge.js';

type Enlarge = typeof enlargeBicubic;
const CASES: [number, number, 1 | 3, number, number][] = [
  [816, 1224, 3, 1024, 1024], // portrait photo to the model's input: x grows, y shrinks
  [1224, 816, 3, 1024, 1024], // landscape: y grows, x shrinks
  [640, 480, 3, 1024, 1024], // both grow
  [1024, 1024, 1, 4243, 2830], // the model's mask to a 12 MP photo
];

function picture(width: number, height: number, channels: number): Buffer {
  const out = Buffer.alloc(width * height * channels);
  let s = 12345;
  for (let i = 0; i < out.length; i++) {
    const x = Math.floor(i / channels) % width;
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = x < width / 3 ? s >>> 24 : x < (2 * width) / 3 ? (x + Math.floor(i / (width * channels))) & 255 : (x >> 1) % 3 === 0 ? 255 : 0;
  }
  return out;
}

async function sharpFill(src: Buffer, width: number, height: number, channels: 1 | 3, outWidth: number, outHeight: number): Promise<Buffer> {
  const resized = sharp(src, { raw: { width, height, channels } }).resize(outWidth, outHeight, { fit: 'fill' });
  return (channels === 1 ? resized.extractChannel(0) : resized).raw().toBuffer();
}

async function split(enlarge: Enlarge, src: Buffer, width: number, height: number, channels: 1 | 3, outWidth: number, outHeight: number): Promise<Buffer> {
  const w = Math.min(width, outWidth);
  const h = Math.min(height, outHeight);
  const reduced = w === width && h === height ? src : await sharpFill(src, width, height, channels, w, h);
  return enlarge(reduced, w, h, channels, outWidth, outHeight);
}

async function cpuMs(run: () => Promise<unknown>): Promise<number> {
  const start = process.cpuUsage();
  await run();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1000;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const flag = (name: string) => {
    const at = args.indexOf(name);
    return at >= 0 ? args[at + 1] : undefined;
  };
  const runs = Number(flag('--runs') ?? 25);
  const beforePath = flag('--before');
  const before: Enlarge | undefined = beforePath ? ((await import(pathToFileURL(beforePath).href)) as { enlargeBicubic: Enlarge }).enlargeBicubic : undefined;
  const variants: [string, (src: Buffer, c: [number, number, 1 | 3, number, number]) => Promise<Buffer>][] = [
    ['sharp one call', (src, [w, h, ch, ow, oh]) => sharpFill(src, w, h, ch, ow, oh)],
    ...(before ? [['split, --before', (src: Buffer, [w, h, ch, ow, oh]: [number, number, 1 | 3, number, number]) => split(before, src, w, h, ch, ow, oh)] as [string, (src: Buffer, c: [number, number, 1 | 3, number, number]) => Promise<Buffer>]] : []),
    ['split, this build', (src, [w, h, ch, ow, oh]) => split(enlargeBicubic, src, w, h, ch, ow, oh)],
  ];
  console.log(`| resize (CPU ms, medians of ${runs}) | ${variants.map(([name]) => name).join(' | ')} |`);
  console.log(`|---|${variants.map(() => '---').join('|')}|`);
  for (const c of CASES) {
    const src = picture(c[0], c[1], c[2]);
    const expected = await sharpFill(src, ...c);
    for (const [name, run] of variants) {
      if (!(await run(src, c)).equals(expected)) throw new Error(`${name}: not sharp's bytes for ${c.join('x')}`);
    }
    const times = variants.map(() => [] as number[]);
    for (let r = 0; r < runs; r++) {
      for (let v = 0; v < variants.length; v++) times[v]!.push(await cpuMs(() => variants[v]![1](src, c)));
    }
    console.log(`| ${c[0]}x${c[1]} → ${c[3]}x${c[4]}, ${c[2]} ch | ${times.map((t) => median(t).toFixed(1)).join(' | ')} |`);
  }
}

await main();
