import sharp from 'sharp';
import { afterAll, describe, expect, it } from 'vitest';
import { ISNET_PROFILE } from '../src/core/image/profile.js';
import { renderOutput, type RenderOptions } from '../src/core/image/output.js';
import { probeImage, segment, type MaskModel } from '../src/core/image/pipeline.js';
import { PixelPool } from '../src/core/image/pixel-pool.js';
import { encodePngRgbaFast, fastPngEncoderAvailable } from '../src/core/image/png-encoder.js';
import { DEFAULT_OUTPUT, type OutputOptions } from '../src/core/output-options.js';
import { objectOnTexture } from './helpers/synthetic-image.js';

/**
 * The shipped PNG encoder (png-encoder.ts: @napi-rs/image, fast deflate, Paeth) is lossless: its
 * file decodes, by libvips, to exactly the pixels it was given, and the API's PNG made with it
 * decodes to the same pixels as the one made with sharp's encoder (the reference, and the
 * fallback). Compared as decoded RGBA, not as bytes: the two compress differently.
 *
 * The mask comes from a stand-in for the model (a soft-edged disc): what is tested is the encode.
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
const pool = new PixelPool({ threads: 1 });
afterAll(() => pool.close());

async function decodedRgba(png: Buffer) {
  const { data, info } = await sharp(png).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height, channels: info.channels };
}

describe('the shipped PNG encoder', () => {
  it('loads on this platform (else every PNG falls back to sharp)', () => {
    expect(fastPngEncoderAvailable()).toBe(true);
  });

  it('decodes to exactly the RGBA it was given: noise, gradients, transparent and soft pixels', async () => {
    const width = 317;
    const height = 211;
    const rgba = Buffer.alloc(width * height * 4);
    let seed = 12345;
    const random = () => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 16) & 0xff;
    for (let y = 0; y < height; y++) {
      for (let x = 0; x < width; x++) {
        const i = (y * width + x) * 4;
        const a = x < 60 ? 0 : x < 120 ? (x * 7 + y) & 0xff : 255;
        rgba[i] = a === 0 ? 0 : y < 100 ? random() : x & 0xff;
        rgba[i + 1] = a === 0 ? 0 : y < 100 ? random() : y & 0xff;
        rgba[i + 2] = a === 0 ? 0 : (x + y) & 0xff;
        rgba[i + 3] = a;
      }
    }
    const png = encodePngRgbaFast(rgba, width, height)!;
    expect(png.subarray(1, 4).toString('latin1')).toBe('PNG');
    const decoded = await decodedRgba(png);
    expect([decoded.width, decoded.height, decoded.channels]).toEqual([width, height, 4]);
    expect(decoded.data.equals(rgba)).toBe(true);
  });

  const outputs: [string, Partial<OutputOptions>][] = [
    ['the default cutout', {}],
    ['a crop', { crop: true }],
    ['a size cap', { size: 'preview' }],
    ['a translucent background', { bgColor: { r: 30, g: 144, b: 255, alpha: 0.5 } }],
  ];
  it.each(outputs)('makes %s with the same pixels as sharp\'s encoder', async (_name, change) => {
    const image = await objectOnTexture(900, 640);
    const output: OutputOptions = { ...DEFAULT_OUTPUT, format: 'png', ...change };
    const render = async (pngEncoder: RenderOptions['pngEncoder']) => {
      const probe = await probeImage(image.bytes, limits);
      const seg = await segment(image.bytes, probe, ISNET_PROFILE, discModel, limits, AbortSignal.timeout(30_000), true);
      return renderOutput(seg, output, { pngCompressionLevel: 2, pngEncoder, maxOutputPixels: Infinity, foregroundEstimation: true }, pool);
    };
    const fast = await render('napi-rs');
    const reference = await render('sharp');
    expect(fast.contentType).toBe('image/png');
    expect([fast.width, fast.height, fast.foreground]).toEqual([reference.width, reference.height, reference.foreground]);
    const a = await decodedRgba(fast.body);
    const b = await decodedRgba(reference.body);
    expect([a.width, a.height, a.channels]).toEqual([b.width, b.height, 4]);
    expect(a.data.equals(b.data)).toBe(true);
    // Not the same file: the fast encoder did make it.
    expect(fast.body.equals(reference.body)).toBe(false);
    // Soft edges and transparency are really there (the comparison is not of two opaque images).
    const alphas = new Set<number>();
    for (let i = 3; i < a.data.length; i += 4) alphas.add(a.data[i]!);
    expect(alphas.size).toBeGreaterThan(10);
  });
});
