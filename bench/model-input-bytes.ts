/**
 * The bytes a build gives the model and the client for each photo, as fingerprints, to compare
 * two builds (a change to how the model input is made must not change them):
 *
 *   node dist/bench/model-input-bytes.js [--build other/dist] photo.jpg [more ...] > this.txt
 *
 * For each photo, three requests in a row through the pixel pool as the handler makes them
 * (segment() with the model-size image movable and the full-size decode alongside, then the
 * default render, given up): the ModelInfer message and its tensor as the model received them (a
 * stand-in model with a call prefix, answering a soft disc, test/helpers/disc-model.ts), the
 * model-size image, and the PNG. The later requests take the pool's warm spares
 * (src/core/image/warm-memory.ts), so a line also says whether the three agreed. `--build` loads
 * another build's dist (e.g. a frozen main) instead of this one; `diff` the two outputs.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const { values, positionals } = parseArgs({ allowPositionals: true, options: { build: { type: 'string' }, threads: { type: 'string', default: '1' } } });
const root = values.build ? path.resolve(values.build) : fileURLToPath(new URL('..', import.meta.url));
const load = (file: string) => import(path.join(root, file));
// Another build's modules: typed loosely (`any`), as this build's types need not fit them.
const { probeImage, segment } = (await load('src/core/image/pipeline.js')) as any;
const { PixelPool } = (await load('src/core/image/pixel-pool.js')) as any;
const { renderOutput } = (await load('src/core/image/output.js')) as any;
const { ISNET_PROFILE } = (await load('src/core/image/profile.js')) as any;
const { DEFAULT_OUTPUT } = (await load('src/core/output-options.js')) as any;
const { softDiscModel, DISC_RENDER } = (await load('test/helpers/disc-model.js')) as any;

const fingerprint = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex').slice(0, 16);
const limits = { maxInputPixels: 50_000_000 };
const prefix = Uint8Array.from({ length: 37 }, (_, i) => (i * 31 + 7) & 255);
const pool = new PixelPool({ threads: Number(values.threads) });
try {
  for (const file of positionals) {
    const bytes = await readFile(file);
    let probe: unknown;
    try {
      probe = await probeImage(bytes, limits);
    } catch (error) {
      console.log(`${path.basename(file)}: refused (${(error as { code?: string }).code ?? (error as Error).message})`);
      continue;
    }
    const seen: string[] = [];
    for (let run = 0; run < 3; run++) {
      let input = '';
      const model = Object.assign(
        (given: any, signal: AbortSignal, size?: { width: number; height: number }) => {
          const tensor: Uint8Array = given.tensor ?? given;
          input = `message ${given.message ? fingerprint(given.message) : '-'} tensor ${fingerprint(new Uint8Array(tensor.buffer, tensor.byteOffset, tensor.byteLength))}`;
          return softDiscModel(given, signal, size);
        },
        { prefix: () => prefix },
      );
      try {
        const seg = await segment(Buffer.from(bytes), probe, ISNET_PROFILE, model, limits, AbortSignal.timeout(120_000), true, pool, undefined, 'movable', false);
        const image = fingerprint(seg.model.rgb);
        const out = await renderOutput(seg, DEFAULT_OUTPUT, DISC_RENDER, pool, undefined, undefined, undefined, true);
        seen.push(`${input} model-size image ${image} png ${fingerprint(out.body)}`);
      } catch (error) {
        seen.push(`error ${(error as { code?: string }).code ?? (error as Error).message}`);
      }
    }
    const same = seen.every((line) => line === seen[0]);
    console.log(`${path.basename(file)}: ${same ? seen[0] : `the three requests differ: ${seen.join(' | ')}`}`);
  }
} finally {
  await pool.close();
}
