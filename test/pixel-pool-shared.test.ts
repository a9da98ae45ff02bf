import { afterAll, describe, expect, it } from 'vitest';
import { ISNET_PROFILE } from '../src/core/index.js';
import { renderFullSize } from '../src/core/image/output.js';
import { keepOnlyWhatRenderNeeds, renderOutput } from '../src/core/image/output.js';
import { probeImage, segment, type MaskModel } from '../src/core/image/pipeline.js';
import { PixelPool } from '../src/core/image/pixel-pool.js';
import { DEFAULT_OUTPUT } from '../src/core/output-options.js';
import { objectOnTexture } from './helpers/synthetic-image.js';

/**
 * A segmentation's buffers that go back to the pixel pool for the render (the full-size decode
 * segment() keeps, the model-size view for foreground colour, the mask) are in shared memory,
 * so this thread sends them without copying them (PixelPool.copiedBytes counts what it copies:
 * 7 MB per 1 MP cutout before). Asserted on what is copied and on the output's bytes, not on
 * time. The model is a stand-in (a soft-edged disc, handed back as a view into a larger buffer
 * as the gRPC answer is): what is tested is how buffers cross threads.
 */
const pool = new PixelPool({ threads: 1 });
afterAll(() => pool.close());

const discModel: MaskModel = async (_input, _signal, size) => {
  const width = size?.width ?? ISNET_PROFILE.width;
  const height = size?.height ?? ISNET_PROFILE.height;
  const answer = new Uint8Array(width * height + 5);
  const mask = answer.subarray(5);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) mask[y * width + x] = Math.max(0, Math.min(255, Math.round(128 - (Math.hypot(x - width / 2, y - height / 2) - width / 4) * 4)));
  }
  return { mask };
};

const limits = { maxInputPixels: 1e7 };
const render = { pngCompressionLevel: 2, maxOutputPixels: Infinity, foregroundEstimation: true };

async function segmented(bytes: Buffer, usePool: boolean, modelImage: 'shared' | 'movable' = 'shared') {
  const probe = await probeImage(bytes, limits);
  return segment(bytes, probe, ISNET_PROFILE, discModel, limits, new AbortController().signal, true, usePool ? pool : undefined, undefined, modelImage);
}

describe('a segmentation reaches its render without copies on this thread', () => {
  it('segment() keeps its decode, model-size view and mask in shared memory, and the render copies none of them', async () => {
    const { bytes } = await objectOnTexture(480, 360);
    const seg = await segmented(bytes, true);
    expect(seg.rgb.length).toBe(480 * 360 * 3);
    for (const buffer of [seg.rgb, seg.model.rgb, seg.mask.grey]) expect(buffer.buffer).toBeInstanceOf(SharedArrayBuffer);
    const copiedBefore = pool.copiedBytes;
    const rendered = await renderOutput(seg, { ...DEFAULT_OUTPUT }, render, pool);
    // The upload is not sent (the render has segment()'s decode): nothing at all is copied.
    expect(pool.copiedBytes - copiedBefore).toBe(0);
    // The decode was the render's to write in place: the segmentation gave it up.
    expect(seg.rgb.length).toBe(0);

    // The same cutout rendered in this thread from a segmentation made without the pool.
    const local = await segmented(bytes, false);
    const here = await renderFullSize({
      bytes,
      probe: local.probe,
      limits,
      decoded: local.rgb,
      mask: local.mask,
      view: local.model,
      options: { ...DEFAULT_OUTPUT },
      render,
    });
    expect(rendered.body.equals(here.body)).toBe(true);
    expect(rendered.foreground).toEqual(here.foreground);
  });
});

/**
 * A one-pass cutout's model-size image goes to one task after segment() (the working view, or the
 * render): it comes back in memory of its own and is moved there, not shared. Shared memory lives
 * until every thread that saw it collected its handle, and the host's thread rarely collects
 * (docs/benchmarks-history.md, "Seventh round"); moved, it is gone from this thread at once.
 */
describe("a one-pass segmentation's model-size image is moved on, not shared", () => {
  it('the render given it (giveUp) moves it without a copy, it reads as empty here after, and the image is the same as from shared memory', async () => {
    const { bytes } = await objectOnTexture(480, 360);
    const shared = await segmented(bytes, true);
    const expected = await renderOutput(shared, { ...DEFAULT_OUTPUT }, render, pool);
    const seg = await segmented(bytes, true, 'movable');
    expect(seg.model.rgb.buffer).toBeInstanceOf(ArrayBuffer);
    expect(seg.model.rgb.length).toBe(ISNET_PROFILE.width * ISNET_PROFILE.height * 3);
    const copiedBefore = pool.copiedBytes;
    const rendered = await renderOutput(seg, { ...DEFAULT_OUTPUT }, render, pool, undefined, undefined, undefined, true);
    expect(pool.copiedBytes - copiedBefore).toBe(0);
    expect(seg.model.rgb.length).toBe(0);
    expect(rendered.body.equals(expected.body)).toBe(true);
  });

  it('a request that waits to render moves it into its working view, and renders the same image', async () => {
    const { bytes } = await objectOnTexture(480, 360);
    const expected = await renderOutput(await segmented(bytes, true), { ...DEFAULT_OUTPUT }, render, pool);
    const seg = await segmented(bytes, true, 'movable');
    const image = seg.model.rgb;
    const copiedBefore = pool.copiedBytes;
    await keepOnlyWhatRenderNeeds(seg, { ...DEFAULT_OUTPUT }, render, pool);
    expect(pool.copiedBytes - copiedBefore).toBe(0);
    expect(image.length).toBe(0);
    const rendered = await renderOutput(seg, { ...DEFAULT_OUTPUT }, render, pool, undefined, undefined, undefined, true);
    expect(rendered.body.equals(expected.body)).toBe(true);
  });

  it('a mask-only request frees it at once', async () => {
    const { bytes } = await objectOnTexture(480, 360);
    const seg = await segmented(bytes, true, 'movable');
    const image = seg.model.rgb;
    await keepOnlyWhatRenderNeeds(seg, { ...DEFAULT_OUTPUT, channels: 'alpha' }, render, pool);
    expect(image.length).toBe(0);
  });
});
