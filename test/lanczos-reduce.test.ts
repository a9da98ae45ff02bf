import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { kernelCalls } from '../src/core/image/kernel-calls.js';
import { reduceHorizontal, reducesWidthExactly } from '../src/core/image/lanczos-reduce.js';
import { decodeForModel, decodeRaw, probeImage } from '../src/core/image/pipeline.js';
import { ISNET_PROFILE } from '../src/core/image/profile.js';

/**
 * reduceHorizontal must give exactly sharp's bytes for `resize(w2, h, { fit: 'fill' })` (libvips's
 * vips_reduceh, lanczos3): the expected values are sharp's own output on random pixels (every
 * mask entry and rounding) and hard black/white stripes (the negative lobes: sums below 0 and
 * above 255, then the clip), over many factors from just above 1 to 4, odd and even sizes.
 */
function picture(width: number, height: number, channels: number, seed: number): Buffer {
  const out = Buffer.alloc(width * height * channels);
  let s = seed >>> 0;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      for (let z = 0; z < channels; z++) {
        s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
        out[(y * width + x) * channels + z] = y % 2 === 0 ? s >>> 24 : (x >> (y % 3)) % 2 === 0 ? 255 : 0;
      }
    }
  }
  return out;
}

/** sharp's reduce of raw pixels (one channel kept as one: sharp's raw output of a grey image is RGB). */
async function sharpReduce(src: Buffer, width: number, height: number, channels: 1 | 3, outWidth: number): Promise<Buffer> {
  const resized = sharp(src, { raw: { width, height, channels } }).resize(outWidth, height, { fit: 'fill' });
  return (channels === 1 ? resized.extractChannel(0) : resized).raw().toBuffer();
}

/** Size pairs: the model input's (1224 -> 1024), factors 1.0x-2x, odd sizes, a few above 2. */
const PAIRS: Array<[number, number]> = [
  [1224, 1024], [1025, 1024], [1023, 1000], [2047, 1024], [2048, 1024], [2049, 1024], [1500, 1024],
  [1279, 1024], [101, 100], [3, 2], [5, 3], [7, 4], [9, 5], [17, 16], [33, 17], [99, 50], [100, 51],
  [641, 640], [643, 321], [300, 199], [301, 250], [256, 255], [1000, 667], [999, 777], [31, 30],
  [4000, 1024], [3000, 1024], [640, 213], [900, 301], [10, 3],
];

describe('reduceHorizontal', () => {
  for (const simd of [true, false]) {
    it(`matches sharp byte for byte on every size pair (${simd ? 'SIMD' : 'JavaScript'})`, async () => {
      let checked = 0;
      for (const [width, outWidth] of PAIRS) {
        if (!reducesWidthExactly(width, outWidth)) continue;
        // Fewer than 8 rows: the per-pixel kernel; 8 or more: the 8-rows-at-a-time one (13: its last block overlaps).
        for (const height of [5, 13]) {
        const src = picture(width, height, 3, width * 31 + outWidth);
        const expected = await sharpReduce(src, width, height, 3, outWidth);
        const got = reduceHorizontal(src, width, height, 3, outWidth, { simd });
        expect(got.equals(expected), `${width} -> ${outWidth}`).toBe(true);
        if (simd) expect(reduceHorizontal(src, width, height, 3, outWidth, { transient: true }).equals(expected), `${width} -> ${outWidth} transient`).toBe(true);
        checked++;
        }
      }
      expect(checked).toBeGreaterThan(40);
    });
  }

  it('matches sharp on random sizes, factors 1x-2x', async () => {
    let s = 12345;
    const next = () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0);
    for (let n = 0; n < 60; n++) {
      const width = 2 + (next() % 1500);
      const outWidth = Math.max(1, Math.ceil(width / (1 + (next() % 1000) / 1000)));
      if (outWidth >= width || !reducesWidthExactly(width, outWidth)) continue;
      const height = 3 + (next() % 20);
      const src = picture(width, height, 3, n);
      const expected = await sharpReduce(src, width, height, 3, outWidth);
      expect(reduceHorizontal(src, width, height, 3, outWidth).equals(expected), `${width}x${height} -> ${outWidth}`).toBe(true);
      expect(reduceHorizontal(src, width, height, 3, outWidth, { simd: false }).equals(expected), `${width}x${height} -> ${outWidth} JS`).toBe(true);
    }
  });

  // Not 4 channels: sharp takes the 4th as alpha and premultiplies it before resizing.
  it('matches sharp for 1 channel (the JavaScript loop)', async () => {
    for (const [width, outWidth] of [[1224, 1024], [99, 50], [1001, 1000]] as const) {
      const src = picture(width, 4, 1, width);
      const expected = await sharpReduce(src, width, 4, 1, outWidth);
      expect(reduceHorizontal(src, width, 4, 1, outWidth).equals(expected), `${width} -> ${outWidth}`).toBe(true);
    }
  });

  it('refuses what libvips does in two steps (a shrinkh first) and enlargements', () => {
    expect(reducesWidthExactly(4096, 1024)).toBe(false);
    expect(reducesWidthExactly(1024, 1024)).toBe(false);
    expect(reducesWidthExactly(1000, 1200)).toBe(false);
    expect(() => reduceHorizontal(Buffer.alloc(4096 * 3), 4096, 1, 3, 1024)).toThrow(RangeError);
  });
});

/** sharp's one call for the model input (the bytes before this reduce and the enlarge existed). */
async function sharpModelInput(bytes: Buffer, hasAlpha: boolean): Promise<Buffer> {
  const decoder = sharp(bytes, { failOn: 'error', autoOrient: true }).toColourspace('srgb');
  const opaque = hasAlpha ? decoder.flatten({ background: '#ffffff' }) : decoder.removeAlpha();
  return opaque.resize(ISNET_PROFILE.width, ISNET_PROFILE.height, { fit: 'fill' }).raw().toBuffer();
}

describe('the model-input decode of a photo wider than the model, not as tall: reduced here, the same bytes as the one call', () => {
  const limits = { maxInputPixels: 100e6 };
  // [width, height, channels, EXIF orientation]: 1224x816 (the bench photo's size), odd sizes, a
  // grey and an RGBA image, a factor above 2, and a half turn (reduced in the stored frame).
  const cases: Array<[number, number, 1 | 3 | 4, number, boolean]> = [
    [1224, 816, 3, 1, true], [1501, 777, 3, 1, true], [1025, 1001, 3, 1, true], [1777, 900, 1, 1, true],
    [1301, 500, 4, 1, true], [3001, 700, 3, 1, true], [1300, 900, 3, 3, true],
    // A reduce by 4 or more: libvips shrinks by an integer first; sharp keeps it.
    [4500, 700, 3, 1, false],
  ];
  for (const [width, height, channels, orientation, ours] of cases) {
    it(`${width}x${height}, ${channels} channel(s), orientation ${orientation}`, async () => {
      const pixels = sharp(picture(width, height, channels, width + height), { raw: { width, height, channels } });
      const encoded = channels === 4 ? pixels.png() : pixels.jpeg({ quality: 90 });
      const bytes = await (orientation === 1 ? encoded : encoded.withMetadata({ orientation })).toBuffer();
      const probe = await probeImage(bytes, limits);
      const before = kernelCalls.reduceHorizontal ?? 0;
      const got = await decodeForModel(bytes, probe, limits, ISNET_PROFILE);
      expect((kernelCalls.reduceHorizontal ?? 0) - before, 'reduced here').toBe(ours ? 1 : 0);
      expect(got.equals(await sharpModelInput(bytes, probe.hasAlpha)), "sharp's bytes").toBe(true);
    });
  }

  it('from the full-size decode when the caller has it (decodeOnce): reduced from those pixels', async () => {
    const bytes = await sharp(picture(1224, 816, 3, 7), { raw: { width: 1224, height: 816, channels: 3 } }).jpeg({ quality: 90 }).toBuffer();
    const probe = await probeImage(bytes, limits);
    const decoded = await decodeRaw(bytes, probe, limits);
    const before = kernelCalls.reduceHorizontal ?? 0;
    const got = await decodeForModel(bytes, probe, limits, ISNET_PROFILE, decoded);
    expect((kernelCalls.reduceHorizontal ?? 0) - before).toBe(1);
    expect(got.equals(await sharpModelInput(bytes, false))).toBe(true);
  });
});
