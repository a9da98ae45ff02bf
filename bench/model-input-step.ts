/**
 * The model-input step alone, this build against another build's dist, interleaved in one thread:
 *
 *   node dist/bench/model-input-step.js --compare /work/wt/base9/dist [--image /tmp/h26e-1mp.jpg] [--runs 60] [--decode-once]
 *
 * decodeForModel from the upload's bytes, or with `--decode-once` as the request path runs it for
 * a small opaque upright JPEG (decodeRaw, then decodeForModel from that decode). Each run checks
 * the two builds gave the same bytes.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: { compare: { type: 'string' }, image: { type: 'string', default: '/tmp/h26e-1mp.jpg' }, runs: { type: 'string', default: '60' }, 'decode-once': { type: 'boolean', default: false } },
});
if (!values.compare) throw new Error('--compare other/dist is required');
const here = fileURLToPath(new URL('..', import.meta.url));
// Another build's modules: typed loosely (`any`), as this build's types need not fit them.
const A = (await import(path.join(here, 'src/core/image/pipeline.js'))) as any;
const B = (await import(path.join(path.resolve(values.compare), 'src/core/image/pipeline.js'))) as any;
const { ISNET_PROFILE } = (await import(path.join(here, 'src/core/image/profile.js'))) as any;
const bytes = await readFile(values.image);
const limits = { maxInputPixels: 50_000_000 };
const probe = await A.probeImage(bytes, limits);
const step = async (m: any): Promise<Buffer> =>
  m.decodeForModel(bytes, probe, limits, ISNET_PROFILE, values['decode-once'] ? await m.decodeRaw(bytes, probe, limits) : undefined);
const runs = Number(values.runs);
const times: { a: number[]; b: number[] } = { a: [], b: [] };
const median = (a: number[]) => [...a].sort((x, y) => x - y)[a.length >> 1]!;
for (let i = 0; i < runs + 5; i++) {
  let t = performance.now();
  const a = await step(A);
  const ta = performance.now() - t;
  t = performance.now();
  const b = await step(B);
  const tb = performance.now() - t;
  if (!a.equals(b)) throw new Error('the two builds gave different model inputs');
  if (i < 5) continue;
  times.a.push(ta);
  times.b.push(tb);
}
const [a, b] = [median(times.a), median(times.b)];
console.log(
  `${values['decode-once'] ? 'decodeRaw + decodeForModel(decoded)' : 'decodeForModel'} ${probe.width}x${probe.height}, medians of ${runs}: this build ${a.toFixed(2)} ms, ${values.compare} ${b.toFixed(2)} ms (ratio ${(b / a).toFixed(2)}x); identical bytes`,
);
