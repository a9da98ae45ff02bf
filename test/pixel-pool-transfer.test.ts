import sharp from 'sharp';
import { afterAll, describe, expect, it } from 'vitest';
import { renderFullSize, type RenderJob } from '../src/core/image/output.js';
import { probeImage } from '../src/core/image/pipeline.js';
import { PixelPool } from '../src/core/image/pixel-pool.js';
import { DEFAULT_OUTPUT } from '../src/core/output-options.js';
import { objectOnTexture } from './helpers/synthetic-image.js';

/**
 * The pixel pool sends a task's buffers to its worker as copies moved there (a transfer list),
 * not as a structured clone of the caller's buffers: the worker renders what this thread would,
 * and the caller's buffers stay whole and unchanged (a task that moved the caller's own memory
 * would leave it detached, empty, under the caller's feet).
 */
const pool = new PixelPool({ threads: 1 });
afterAll(() => pool.close());

/** A movable copy (memory of its own), as the caller's buffers may well be. */
const own = (bytes: Buffer) => {
  const copy = Buffer.allocUnsafeSlow(bytes.length);
  bytes.copy(copy);
  return copy;
};

/** A render job at 360x240 with a soft-edged disc for a mask (model grid 96x96), its buffers movable. */
async function job(decoded: boolean): Promise<RenderJob> {
  const { bytes } = await objectOnTexture(360, 240);
  const limits = { maxInputPixels: 1e7 };
  const probe = await probeImage(bytes, limits);
  const grey = Buffer.allocUnsafeSlow(96 * 96);
  for (let y = 0; y < 96; y++) for (let x = 0; x < 96; x++) grey[y * 96 + x] = Math.max(0, Math.min(255, Math.round(128 - (Math.hypot(x - 48, y - 48) - 24) * 12)));
  const modelRgb = own(await sharp(bytes).resize(96, 96, { fit: 'fill' }).raw().toBuffer());
  return {
    bytes: own(bytes),
    probe,
    limits,
    decoded: decoded ? own(await sharp(bytes).removeAlpha().raw().toBuffer()) : undefined,
    // The mask is both the plan's and the view's (as segment() makes them).
    mask: { grey, width: 96, height: 96, parts: [] },
    view: { rgb: modelRgb, alpha: grey, width: 96, height: 96 },
    options: { ...DEFAULT_OUTPUT },
    render: { pngCompressionLevel: 2, maxOutputPixels: Infinity, foregroundEstimation: true },
  };
}

/** Copies of every buffer of a job, to compare with afterwards. */
function snapshot(j: RenderJob): Buffer[] {
  return [j.bytes, j.decoded ?? Buffer.alloc(0), j.mask.grey, j.view!.rgb].map((b) => Buffer.from(b));
}

describe('pixel pool tasks move copies of their buffers', () => {
  for (const decoded of [true, false]) {
    it(`a render in the worker gives the bytes a render in this thread gives, and leaves the caller's buffers as they were (${decoded ? 'with' : 'without'} segment()'s decode)`, async () => {
      const sent = await job(decoded);
      const before = snapshot(sent);
      const inWorker = await pool.render(sent);
      const after = snapshot(sent);
      expect(after.map((b) => b.length)).toEqual(before.map((b) => b.length));
      for (let i = 0; i < before.length; i++) expect(after[i]!.equals(before[i]!)).toBe(true);
      // The same job rendered here, from fresh copies of the same inputs.
      const local = await job(decoded);
      const here = await renderFullSize({ ...local, decoded: local.decoded && Buffer.from(local.decoded) });
      expect(inWorker.body.equals(here.body)).toBe(true);
      expect(inWorker.foreground).toEqual(here.foreground);
    });
  }

  it('a mask confidence in the worker reads an unaligned mask (a view into a larger message) as the same bytes', async () => {
    const message = Buffer.allocUnsafeSlow(96 * 96 + 7);
    const grey = message.subarray(7);
    for (let i = 0; i < grey.length; i++) grey[i] = i % 3 === 0 ? 255 : i % 3 === 1 ? 0 : 100 + (i % 50);
    // By hand: 3072 pixels unsure (100..149), 3072 sure object (255), 3072 background:
    // 1 - 3072 / (3072 + 3072).
    expect(await pool.looksConfidence(grey, 96, 96, [], 0)).toBe(0.5);
    expect(message.length).toBe(96 * 96 + 7);
  });
});
