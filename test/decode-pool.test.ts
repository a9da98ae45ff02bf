import sharp from 'sharp';
import { afterAll, describe, expect, it } from 'vitest';
import { prepareModelInput } from '../src/core/image/model-input.js';
import { renderFullSize } from '../src/core/image/output.js';
import { probeImage } from '../src/core/image/pipeline.js';
import { PixelPool } from '../src/core/image/pixel-pool.js';
import { ISNET_PROFILE } from '../src/core/image/profile.js';
import { isShared } from '../src/core/image/shared-bytes.js';
import { DEFAULT_OUTPUT } from '../src/core/output-options.js';
import { objectOnTexture, softDisc as disc } from './helpers/synthetic-image.js';

/**
 * A small photo's full-size decode (segment()'s decode-once) is copied into shared memory in the
 * pixel worker and dies with its render; the worker takes that memory back after the render and
 * copies the next request's decode into it, instead of mapping 3 MB afresh (shared-bytes.ts's
 * SharedPool). Asserted on the worker's counts and on the bytes: the next request's decode and
 * cutout are what they are from fresh memory.
 */
const pool = new PixelPool({ threads: 1 });
afterAll(() => pool.close());
const limits = { maxInputPixels: 1e7 };
const render = { pngCompressionLevel: 2, maxOutputPixels: Infinity, foregroundEstimation: true };

async function photo(centre: { x: number; y: number }, shift: number) {
  const { bytes } = await objectOnTexture(1224, 816, 'jpeg', centre);
  const probe = await probeImage(bytes, limits);
  const grey = disc(256, shift);
  const view = { rgb: await sharp(bytes).removeAlpha().resize(256, 256, { fit: 'fill' }).raw().toBuffer(), alpha: grey, width: 256, height: 256 };
  return { bytes, probe, job: { bytes, probe, limits, profile: ISNET_PROFILE, decodeOnce: true }, plan: { grey, width: 256, height: 256, parts: [] }, view };
}

describe("a small photo's full-size decode in reused shared memory", () => {
  it('is taken back after its render and holds the next request\'s decode, which renders to the same bytes as from fresh memory', async () => {
    const first = await photo({ x: 0.5, y: 0.55 }, 0);
    const a = await pool.modelInput(first.job);
    expect(a.decoded && isShared(a.decoded)).toBe(true);
    await pool.render({ bytes: first.bytes, probe: first.probe, limits, decoded: a.decoded, mask: first.plan, view: first.view, options: { ...DEFAULT_OUTPUT }, render });

    const second = await photo({ x: 0.3, y: 0.4 }, 40);
    const before = await pool.workerKernelCalls();
    const b = await pool.modelInput(second.job);
    const after = await pool.workerKernelCalls();
    expect((after.sharedPoolReused ?? 0) - (before.sharedPoolReused ?? 0)).toBe(1);
    expect((after.sharedPoolFresh ?? 0) - (before.sharedPoolFresh ?? 0)).toBe(0);

    const here = await prepareModelInput(second.job);
    expect(b.decoded!.equals(here.decoded!)).toBe(true);
    const pooled = await pool.render({ bytes: second.bytes, probe: second.probe, limits, decoded: b.decoded, mask: second.plan, view: second.view, options: { ...DEFAULT_OUTPUT }, render });
    const fresh = await renderFullSize({ bytes: second.bytes, probe: second.probe, limits, decoded: here.decoded, mask: second.plan, view: second.view, options: { ...DEFAULT_OUTPUT }, render });
    expect(pooled.body.equals(fresh.body)).toBe(true);
  });
});
