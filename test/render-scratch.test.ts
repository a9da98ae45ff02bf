import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { kernelCalls } from '../src/core/image/kernel-calls.js';
import { renderFullSize } from '../src/core/image/output.js';
import { probeImage } from '../src/core/image/pipeline.js';
import { Scratch } from '../src/core/image/scratch.js';
import { DEFAULT_OUTPUT } from '../src/core/output-options.js';
import { objectOnTexture, softDisc as disc } from './helpers/synthetic-image.js';

/**
 * The RGBA a render composes for the fast PNG encoder is composed into a buffer the thread reuses
 * (scratch.ts), not a fresh one per render. Asserted on the counts of reused and fresh loans and
 * on the bytes: a render after another image's gives what it gives first (the reused buffer's
 * old pixels never reach an output). The mask is a soft-edged disc on the model's grid.
 */
const limits = { maxInputPixels: 1e7 };
const render = { pngCompressionLevel: 2, maxOutputPixels: Infinity, foregroundEstimation: true };
const count = (name: string) => kernelCalls[name] ?? 0;

async function cutout(centre: { x: number; y: number }, shift: number) {
  const { bytes } = await objectOnTexture(400, 300, 'jpeg', centre);
  const probe = await probeImage(bytes, limits);
  const grey = disc(256, shift);
  return renderFullSize({
    bytes,
    probe,
    limits,
    mask: { grey, width: 256, height: 256, parts: [] },
    view: { rgb: await sharp(bytes).removeAlpha().resize(256, 256, { fit: 'fill' }).raw().toBuffer(), alpha: grey, width: 256, height: 256 },
    options: { ...DEFAULT_OUTPUT },
    render,
  });
}

describe('the fast PNG path composes into a reused buffer', () => {
  it('renders after the first reuse the thread\'s buffer, and a reused buffer leaves nothing of the last image in the next', async () => {
    const first = await cutout({ x: 0.5, y: 0.55 }, 0);
    const reusedBefore = count('scratchReused');
    const other = await cutout({ x: 0.3, y: 0.4 }, 40);
    const again = await cutout({ x: 0.5, y: 0.55 }, 0);
    expect(count('scratchReused') - reusedBefore).toBe(2);
    expect(other.body.equals(first.body)).toBe(false);
    expect(again.body.equals(first.body)).toBe(true);
  });

  it("upscales the model's mask into the thread's reused mask buffer, and a reused one leaves nothing of the last mask in the next", async () => {
    const first = await cutout({ x: 0.5, y: 0.55 }, 0);
    const reusedBefore = count('maskScratchReused');
    const other = await cutout({ x: 0.3, y: 0.4 }, 40);
    const again = await cutout({ x: 0.5, y: 0.55 }, 0);
    expect(count('maskScratchReused') - reusedBefore).toBe(2);
    expect(other.body.equals(first.body)).toBe(false);
    expect(again.body.equals(first.body)).toBe(true);
  });

  it('lends its buffer to one borrower at a time, and a fresh one past its size', () => {
    const scratch = new Scratch(1000);
    const a = scratch.take(800);
    const b = scratch.take(800);
    expect(b.buffer.buffer).not.toBe(a.buffer.buffer);
    a.release();
    b.release();
    const c = scratch.take(600);
    expect(c.buffer.buffer).toBe(a.buffer.buffer);
    expect(c.buffer.length).toBe(600);
    c.release();
    expect(scratch.take(1001).buffer.buffer).not.toBe(a.buffer.buffer);
    expect(scratch.take(700).buffer.buffer).toBe(a.buffer.buffer);
  });
});
