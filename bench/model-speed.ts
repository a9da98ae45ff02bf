/**
 * Bench section `int8` (npm run bench -- --only int8 [--image photo.jpg] [--runs 7] [--models isnet,isnet-int8]):
 * session.run of several built-in models side by side, each in its own worker thread exactly as
 * the inference server runs it (SessionPool: one worker, all cores as intra-op threads), on the
 * same 1024x1024 8-bit input made from a photo. Runs alternate model by model so every model
 * sees the same machine load; the figure is the median of the worker's own session.run time
 * (no gRPC), and the ratio of each model to the first.
 */
import os from 'node:os';
import sharp from 'sharp';
import { resolveModelFile } from '../src/inference-server/model-source.js';
import { SessionPool } from '../src/inference-server/session-pool.js';

export interface ModelSpeed {
  image: string;
  runs: number;
  threads: number;
  models: Record<string, { medianMs: number; runsMs: number[]; ratioToFirst: number }>;
}

export async function compareModelSpeed(photo: Buffer, models: string[], runs: number): Promise<ModelSpeed> {
  const threads = os.availableParallelism();
  const rgb = await sharp(photo).autoOrient().removeAlpha().resize(1024, 1024, { fit: 'fill' }).raw().toBuffer();
  const meta = await sharp(photo).metadata();
  const pools = new Map<string, SessionPool>();
  try {
    for (const model of models) {
      const pool = new SessionPool({ modelFile: await resolveModelFile(model), providers: ['cpu'], workers: 1, intraOpThreads: threads, maxQueue: 2 });
      const signature = await pool.start();
      if (signature.inputs[0]?.datatype !== 'UINT8') throw new Error(`${model} does not take 8-bit pixels: only prepared models are compared`);
      pools.set(model, pool);
    }
    const input = () => [{ name: 'image', datatype: 'UINT8' as const, shape: [1, 1024, 1024, 3], data: new Uint8Array(rgb).buffer }];
    const times = new Map<string, number[]>(models.map((m) => [m, []]));
    // One unmeasured run each (first-run allocations), then alternating measured runs.
    for (const model of models) await pools.get(model)!.run(input(), ['mask']);
    for (let i = 0; i < runs; i++) {
      for (const model of models) times.get(model)!.push((await pools.get(model)!.run(input(), ['mask'])).runMs);
    }
    const median = (xs: number[]) => {
      const s = [...xs].sort((a, b) => a - b);
      const mid = Math.floor(s.length / 2);
      return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
    };
    const first = median(times.get(models[0]!)!);
    return {
      image: `${meta.width}x${meta.height}`,
      runs,
      threads,
      models: Object.fromEntries(
        models.map((m) => {
          const ms = median(times.get(m)!);
          return [m, { medianMs: Math.round(ms), runsMs: times.get(m)!.map(Math.round), ratioToFirst: Math.round((ms / first) * 1000) / 1000 }];
        }),
      ),
    };
  } finally {
    for (const pool of pools.values()) await pool.close();
  }
}

export function printModelSpeed(speed: ModelSpeed): void {
  console.log(`\nint8: session.run in a worker thread (${speed.threads} threads), ${speed.image} photo at 1024x1024, medians of ${speed.runs} alternating runs`);
  console.log('| model | median ms | runs ms | ratio to first |\n|---|---|---|---|');
  for (const [model, s] of Object.entries(speed.models)) console.log(`| ${model} | ${s.medianMs} | ${s.runsMs.join(', ')} | ${s.ratioToFirst} |`);
}
