import { afterAll, describe, expect, it } from 'vitest';
import { renderOutput } from '../src/core/image/output.js';
import { probeImage, segment, type MaskModel } from '../src/core/image/pipeline.js';
import { PixelPool } from '../src/core/image/pixel-pool.js';
import { ISNET_PROFILE } from '../src/core/image/profile.js';
import { COLLECT_AFTER_PIXELS } from '../src/core/image/render-garbage.js';
import { DEFAULT_OUTPUT } from '../src/core/output-options.js';
import { objectOnTexture } from './helpers/synthetic-image.js';

/**
 * The pixel worker collects its garbage as a render ends once COLLECT_AFTER_PIXELS full-size
 * pixels have been rendered since the last collection (render-garbage.ts), counted in the
 * worker's kernel counts: a large render's buffers and the PNG encoder's native copy of its RGBA
 * are gone by the time its result is back, not left until the next render. The model is a stand-in (a soft disc): what is tested is when the
 * worker collects, not the cutout.
 */
const discModel: MaskModel = async () => {
  const { width, height } = ISNET_PROFILE;
  const mask = new Uint8Array(width * height);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) mask[y * width + x] = Math.hypot(x - width / 2, y - height / 2) < width * 0.3 ? 255 : 0;
  }
  return { mask };
};
const limits = { maxInputPixels: 50_000_000 };
const render = { pngCompressionLevel: 2, maxOutputPixels: Infinity, foregroundEstimation: true };
const pool = new PixelPool({ threads: 1 });
afterAll(() => pool.close());

describe('pixel worker garbage collection after renders', () => {
  it('collects as each render ends that brings the pixels since the last collection to 4 MP, and not before', async () => {
    expect(COLLECT_AFTER_PIXELS).toBe(4_000_000);
    const { bytes } = await objectOnTexture(2000, 1000);
    const probe = await probeImage(bytes, limits);
    const collections = async () => (await pool.workerKernelCalls()).collectGarbage ?? 0;
    const seen: number[] = [];
    for (let i = 0; i < 5; i++) {
      const seg = await segment(bytes, probe, ISNET_PROFILE, discModel, limits, AbortSignal.timeout(60_000), false, pool);
      const out = await renderOutput(seg, DEFAULT_OUTPUT, render, pool);
      expect(out.width).toBe(2000);
      seen.push(await collections());
    }
    // 2 MP each: as the 2nd ends (4 MP since the start) and as the 4th ends (4 MP since the 2nd).
    expect(seen).toEqual([0, 1, 1, 2, 2]);
  });

  it('has collected by the time a render of 4 MP or more is back, before any other render starts', async () => {
    const { bytes } = await objectOnTexture(2000, 2000);
    const probe = await probeImage(bytes, limits);
    const collections = async () => (await pool.workerKernelCalls()).collectGarbage ?? 0;
    const before = await collections();
    const seg = await segment(bytes, probe, ISNET_PROFILE, discModel, limits, AbortSignal.timeout(60_000), false, pool);
    const out = await renderOutput(seg, DEFAULT_OUTPUT, render, pool);
    expect(out.width).toBe(2000);
    expect(await collections()).toBe(before + 1);
  });
});
