import { afterAll, describe, expect, it } from 'vitest';
import { ISNET_PROFILE } from '../src/core/image/profile.js';
import { renderOutput } from '../src/core/image/output.js';
import { decodeRaw, probeImage, segment, type MaskModel } from '../src/core/image/pipeline.js';
import { PixelPool } from '../src/core/image/pixel-pool.js';
import { DEFAULT_OUTPUT } from '../src/core/output-options.js';
import { softDiscModel } from './helpers/disc-model.js';
import { objectOnTexture } from './helpers/synthetic-image.js';

/**
 * An image the render would decode at full size after the model (a PNG: not decoded once with
 * the model's input as a small JPEG is) is decoded in the pixel pool while the model call is
 * under way, when the request has the memory for it: the model call and the decode overlap, and
 * the cutout is the same, byte for byte. Overlap is shown by events: the stand-in model answers
 * only once it has seen the decode start and finish.
 */
const limits = { maxInputPixels: 50_000_000 };
const render = { pngCompressionLevel: 4, maxOutputPixels: Infinity, foregroundEstimation: true };
const pool = new PixelPool({ threads: 1 });
afterAll(() => pool.close());

describe('the full-size decode beside the model call', () => {
  it('runs while the model call is pending, and the cutout is the same bytes as when the render decodes', async () => {
    const image = await objectOnTexture(1224, 816, 'png');
    const probe = await probeImage(image.bytes, limits);
    const decodes: Promise<unknown>[] = [];
    const fullDecode = pool.fullDecode.bind(pool);
    pool.fullDecode = (...args) => {
      const running = fullDecode(...args);
      decodes.push(running);
      return running;
    };
    let seenInsideModel = -1;
    const model: MaskModel = async (input, signal, size) => {
      // Begun before the model was called, and finished while the call was still pending.
      seenInsideModel = decodes.length;
      await Promise.all(decodes);
      return softDiscModel(input, signal, size);
    };
    const seg = await segment(image.bytes, probe, ISNET_PROFILE, model, limits, AbortSignal.timeout(60_000), true, pool);
    expect(seenInsideModel).toBe(1);
    // Counted in the decode stage, and told apart from the decode the request waited for (its span).
    expect(seg.decodedBesideMs).toBeGreaterThan(0);
    expect(seg.timings.decode).toBeGreaterThanOrEqual(seg.decodedBesideMs!);
    expect(seg.rgb.equals(await decodeRaw(image.bytes, probe, limits))).toBe(true);
    // In shared memory: it reaches the render's worker without a copy on this thread.
    const copiedBefore = pool.copiedBytes;
    const beside = await renderOutput(seg, DEFAULT_OUTPUT, render, pool);
    expect(pool.copiedBytes - copiedBefore).toBeLessThan(probe.width * probe.height * 3);
    pool.fullDecode = fullDecode;

    // Without the memory for it (decodeAlongside false), the render decodes after the model, as before.
    const later = await segment(image.bytes, probe, ISNET_PROFILE, softDiscModel, limits, AbortSignal.timeout(60_000), false, pool);
    expect(later.rgb.length).toBe(0);
    expect(later.decodedBesideMs).toBeUndefined();
    const rendered = await renderOutput(later, DEFAULT_OUTPUT, render, pool);
    expect(beside.body.length).toBeGreaterThan(0);
    expect(beside.body.equals(rendered.body)).toBe(true);
  });

  it('is left to the render for an image too large for it (twice the model size and more)', async () => {
    const image = await objectOnTexture(2100, 2100, 'png');
    const probe = await probeImage(image.bytes, limits);
    const seg = await segment(image.bytes, probe, ISNET_PROFILE, softDiscModel, limits, AbortSignal.timeout(60_000), true, pool);
    expect(seg.rgb.length).toBe(0);
  });
});
