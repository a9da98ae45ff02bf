/**
 * A render split across idle pixel workers (src/core/image/render-bands.ts) against the same
 * render by one worker, in this process: the bytes (must be identical) and, for each photo, the
 * render's wall time and the process's CPU per render, renders alternating.
 *
 *   node dist/bench/render-bands.js --image photo.jpg [--image more.jpg ...] [--dir folder] [--threads 2] [--runs 15] [--warmup 5]
 *
 * Each photo's mask is made once by the real model (`isnet-int8`, on an inference server started
 * for it), then given to both renders, so the soft edges are a real cutout's. Photos the default
 * cutout does not split (larger than twice the model's size, an alpha of their own) render as one
 * task in both and say so. The split pool is told every core is idle (PixelPool's `idleCores`), so
 * it splits across its idle workers whatever else runs on the machine: what is measured is the
 * split itself; on a busy machine its two bands share the cores with everything else.
 */
import { readdir, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ISNET_PROFILE } from '../src/core/index.js';
import { InferenceClient } from '../src/core/inference/inference-client.js';
import { renderOutput } from '../src/core/image/output.js';
import { probeImage, segment, type MaskModel } from '../src/core/image/pipeline.js';
import { PixelPool } from '../src/core/image/pixel-pool.js';
import { DEFAULT_OUTPUT } from '../src/core/output-options.js';
import { startInferenceProcess } from '../test/helpers/inference-process.js';

const { values } = parseArgs({
  options: {
    image: { type: 'string', multiple: true, default: [] },
    dir: { type: 'string' },
    threads: { type: 'string', default: '2' },
    runs: { type: 'string', default: '15' },
    warmup: { type: 'string', default: '5' },
  },
});
const photos = [...values.image!];
if (values.dir) for (const name of (await readdir(values.dir)).sort()) if (/\.(jpe?g|png|webp)$/i.test(name)) photos.push(path.join(values.dir, name));
if (photos.length === 0) throw new Error('--image photo.jpg or --dir folder is required');
const threads = Number(values.threads);
const runs = Number(values.runs);
const warmup = Number(values.warmup);
const limits = { maxInputPixels: 50_000_000 };
const render = { pngCompressionLevel: 2, pngEncoder: 'napi-rs' as const, maxOutputPixels: Infinity, foregroundEstimation: true };
const one = new PixelPool({ threads, renderBands: 1 });
const split = new PixelPool({ threads, renderBands: threads, idleCores: () => os.availableParallelism() });
const server = await startInferenceProcess(['--threads', String(os.availableParallelism()), '--model', 'isnet-int8']);
const client = new InferenceClient({ address: server.address, timeoutMs: 300_000, maxMessageBytes: 64 << 20, retryAfterSeconds: 1 });
const model = client.maskModel('isnet', ISNET_PROFILE);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const r1 = (x: number) => Math.round(x * 10) / 10;
const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

console.log(`${threads} pixel workers, ${runs} renders each after ${warmup}, alternating; load average ${os.loadavg().map(r1).join(' ')}`);
console.log('| photo | size | split in | same bytes | render ms, one worker | split | CPU ms per render, one worker | split |\n|---|---|---|---|---|---|---|---|');
try {
  for (const file of photos) {
    const bytes = await readFile(file);
    let probe;
    try {
      probe = await probeImage(bytes, limits);
    } catch (error) {
      console.log(`| ${path.basename(file)} | refused: ${(error as Error).message} | | | | | | |`);
      continue;
    }
    // The model runs once; both pools render its mask.
    let recorded: Awaited<ReturnType<MaskModel>> | undefined;
    const once: MaskModel = async (input, signal, size) => (recorded ??= await model(input, signal, size));
    const cutout = async (pool: PixelPool) => {
      const seg = await segment(bytes, probe, ISNET_PROFILE, once, limits, AbortSignal.timeout(300_000), true, pool, undefined, 'movable');
      const before = pool.tasksSettled;
      const cpu = cpuMs();
      const started = performance.now();
      const out = await renderOutput(seg, DEFAULT_OUTPUT, render, pool, undefined, undefined, undefined, true);
      const ms = performance.now() - started;
      const bands = pool.tasksSince(before).filter((t) => t.name === 'renderBand').length;
      return { body: out.body, ms, cpu: cpuMs() - cpu, bands };
    };
    const times = { one: [] as number[], split: [] as number[], cpuOne: [] as number[], cpuSplit: [] as number[] };
    let same = true;
    let bands = 0;
    for (let i = 0; i < warmup + runs; i++) {
      let a: Awaited<ReturnType<typeof cutout>>;
      let b: Awaited<ReturnType<typeof cutout>>;
      try {
        a = await cutout(one);
        b = await cutout(split);
      } catch (error) {
        console.log(`| ${path.basename(file)} | refused: ${(error as Error).message} | | | | | | |`);
        break;
      }
      same &&= a.body.equals(b.body);
      bands = b.bands;
      if (i < warmup) continue;
      times.one.push(a.ms);
      times.split.push(b.ms);
      times.cpuOne.push(a.cpu);
      times.cpuSplit.push(b.cpu);
    }
    if (times.one.length === 0) continue;
    console.log(
      `| ${path.basename(file)} | ${probe.width}x${probe.height} | ${bands || 'one task'} | ${same ? 'yes' : '**NO**'} | ${r1(median(times.one))} | ${r1(median(times.split))} | ${r1(median(times.cpuOne))} | ${r1(median(times.cpuSplit))} |`,
    );
  }
} finally {
  console.log(`(load average ${os.loadavg().map(r1).join(' ')})`);
  await Promise.all([one.close(), split.close(), client.close()]);
  await server.stop();
}
