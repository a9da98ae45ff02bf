import sharp from 'sharp';
import { afterAll, describe, expect, it } from 'vitest';
import { ISNET_PROFILE } from '../src/core/image/profile.js';
import { keepOnlyWhatRenderNeeds, renderOutput } from '../src/core/image/output.js';
import { fullSizeAlpha, probeImage, segment, type MaskModel } from '../src/core/image/pipeline.js';
import { PixelPool } from '../src/core/image/pixel-pool.js';
import { DEFAULT_OUTPUT, type OutputOptions } from '../src/core/output-options.js';
import { objectOnTexture } from './helpers/synthetic-image.js';

/**
 * A request that waits for memory to render in (the pixel budget) holds only small things
 * meanwhile: no full-size mask or colour (the mask is a plan at the model's size, made full size
 * by the pixel pool when rendering), and of the model-size view only what foreground estimation
 * needs. Holding less must not change the cutout by a single byte.
 *
 * The mask comes from a stand-in for the model (a soft-edged disc at the model's size): what is
 * tested is the pipeline's bookkeeping, not the model.
 */
const discModel: MaskModel = async () => {
  const { width, height } = ISNET_PROFILE;
  const mask = new Uint8Array(width * height);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const d = Math.hypot(x - width / 2, y - height * 0.55) - width * 0.3;
      mask[y * width + x] = Math.max(0, Math.min(255, Math.round(128 - d * 16)));
    }
  }
  return { mask };
};

const limits = { maxInputPixels: 50_000_000 };
const render = { pngCompressionLevel: 4, maxOutputPixels: Infinity, foregroundEstimation: true };
const pool = new PixelPool({ threads: 1 });
afterAll(() => pool.close());

async function cutout(bytes: Buffer, output: OutputOptions, wait: boolean) {
  const probe = await probeImage(bytes, limits);
  const seg = await segment(bytes, probe, ISNET_PROFILE, discModel, limits, AbortSignal.timeout(30_000), !wait);
  if (wait) {
    expect(seg.rgb.length).toBe(0);
    await keepOnlyWhatRenderNeeds(seg, output, render, pool);
    expect(seg.model.rgb.length).toBeLessThan(ISNET_PROFILE.width * ISNET_PROFILE.height * 3);
  }
  return renderOutput(seg, output, render, pool);
}

describe('a request waiting to render', () => {
  it('holds the mask at the model\'s size only, and fullSizeAlpha makes the full size from it', async () => {
    const image = await objectOnTexture(800, 600);
    const probe = await probeImage(image.bytes, limits);
    const seg = await segment(image.bytes, probe, ISNET_PROFILE, discModel, limits, AbortSignal.timeout(30_000), false);
    expect(seg.mask.grey.length).toBe(ISNET_PROFILE.width * ISNET_PROFILE.height);
    expect(seg.rgb.length).toBe(0);
    const alpha = await fullSizeAlpha(seg, pool);
    expect(alpha.length).toBe(800 * 600);
    expect(alpha[Math.round(600 * 0.55) * 800 + 400]).toBe(255);
    expect(alpha[0]).toBe(0);
  });

  it.each([
    ['a transparent PNG', DEFAULT_OUTPUT],
    ['a JPEG on a colour', { ...DEFAULT_OUTPUT, format: 'jpg', bgColor: { r: 20, g: 200, b: 90, alpha: 1 } } as OutputOptions],
    ['the mask alone', { ...DEFAULT_OUTPUT, channels: 'alpha' } as OutputOptions],
    ['a crop', { ...DEFAULT_OUTPUT, crop: true } as OutputOptions],
  ])('makes exactly the cutout of a request that did not wait: %s', async (_name, output) => {
    const image = await objectOnTexture(900, 700);
    const waited = await cutout(image.bytes, output, true);
    const direct = await cutout(image.bytes, output, false);
    expect(waited.body.equals(direct.body)).toBe(true);
    expect(waited.foreground).toEqual(direct.foreground);
  });

  it('the mask alone of an opaque image needs no full-size decode: the same bytes from the mask only', async () => {
    const image = await objectOnTexture(900, 700);
    const output = { ...DEFAULT_OUTPUT, channels: 'alpha' } as OutputOptions;
    const probe = await probeImage(image.bytes, limits);
    const seg = await segment(image.bytes, probe, ISNET_PROFILE, discModel, limits, AbortSignal.timeout(30_000), false);
    expect(seg.rgb.length).toBe(0);
    const maskOnly = await renderOutput(seg, output, render, pool);
    const decoded = await cutout(image.bytes, output, false);
    expect(maskOnly.body.equals(decoded.body)).toBe(true);
    expect(maskOnly.foreground).toEqual(decoded.foreground);
  });

  it('a full-size decode that fails in the pool\'s worker answers corrupt_image (422), as it did on the main thread, not a 500', async () => {
    const image = await objectOnTexture(900, 700);
    const probe = await probeImage(image.bytes, limits);
    const seg = await segment(image.bytes, probe, ISNET_PROFILE, discModel, limits, AbortSignal.timeout(30_000), false);
    // The model saw the image; the bytes the render decodes are cut short.
    seg.bytes = image.bytes.subarray(0, image.bytes.length >> 1);
    await expect(renderOutput(seg, DEFAULT_OUTPUT, render, pool)).rejects.toMatchObject({ name: 'ApiError', code: 'corrupt_image', status: 422 });
  });

  it('folds the input\'s own alpha into the deferred mask as into the direct one', async () => {
    // An RGBA upload whose left quarter is transparent: that part must stay transparent.
    const { rgb } = await objectOnTexture(900, 700, 'raw');
    const alpha = Buffer.alloc(900 * 700, 255);
    for (let y = 0; y < 700; y++) alpha.fill(0, y * 900, y * 900 + 225);
    const png = await sharp(rgb, { raw: { width: 900, height: 700, channels: 3 } }).joinChannel(alpha, { raw: { width: 900, height: 700, channels: 1 } }).png().toBuffer();
    const waited = await cutout(png, DEFAULT_OUTPUT, true);
    const direct = await cutout(png, DEFAULT_OUTPUT, false);
    expect(waited.body.equals(direct.body)).toBe(true);
    const out = await sharp(waited.body).extractChannel(3).raw().toBuffer();
    // Inside the stand-in's disc: transparent where the input was, opaque where it was not.
    expect(out[385 * 900 + 200]).toBe(0);
    expect(out[385 * 900 + 300]).toBe(255);
  });
});
