import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { ENLARGE_TILE_WIDTH, enlargeBicubic, enlargesWithSimd } from '../src/core/image/bicubic-enlarge.js';
import { kernelCalls } from '../src/core/image/kernel-calls.js';
import { preparePassInputs } from '../src/core/image/multi-pass.js';
import { decodeForModel, decodeRaw, probeImage } from '../src/core/image/pipeline.js';
import { ISNET_PROFILE } from '../src/core/image/profile.js';

/**
 * enlargeBicubic must give exactly sharp's bytes for `resize(w, h, { fit: 'fill' })` wherever an
 * axis grows: the expected values are sharp's own output (libvips's bicubic affine), on generated
 * pictures that stress every part of the arithmetic — noise (every coefficient and rounding),
 * gradients, and hard black/white edges (the negative lobes: intermediate sums below 0 and above
 * 255, then the clip). An axis that shrinks is reduced by sharp first, as vips_resize does.
 */

/** A picture of the three kinds side by side: noise, a diagonal gradient, hard-edged stripes and a block. */
function picture(width: number, height: number, channels: number, seed: number): Buffer {
  const out = Buffer.alloc(width * height * channels);
  let s = seed >>> 0;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const part = Math.floor((3 * x) / width);
      for (let z = 0; z < channels; z++) {
        let v: number;
        s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
        if (part === 0) v = s >>> 24;
        else if (part === 1) v = Math.round((255 * (x + y + z * 7)) / (width + height + 14)) & 255;
        else v = (x >> 1) % 3 === 0 || (y > height / 3 && y < (2 * height) / 3 && x % 5 < 2) ? 255 : 0;
        out[(y * width + x) * channels + z] = v;
      }
    }
  }
  return out;
}

/** sharp's one-call fill resize of raw pixels (one channel kept as one). */
async function sharpFill(src: Buffer, width: number, height: number, channels: 1 | 3, outWidth: number, outHeight: number): Promise<Buffer> {
  const resized = sharp(src, { raw: { width, height, channels } }).resize(outWidth, outHeight, { fit: 'fill' });
  return (channels === 1 ? resized.extractChannel(0) : resized).raw().toBuffer();
}

/** The split under test: sharp reduces the shrinking axes (if any), enlargeBicubic grows the rest. */
async function split(src: Buffer, width: number, height: number, channels: 1 | 3, outWidth: number, outHeight: number, simd: boolean): Promise<Buffer> {
  const w1 = Math.min(width, outWidth);
  const h1 = Math.min(height, outHeight);
  const reduced = w1 === width && h1 === height ? src : await sharpFill(src, width, height, channels, w1, h1);
  return enlargeBicubic(reduced, w1, h1, channels, outWidth, outHeight, { simd });
}

/** [width, height, outWidth, outHeight]: small and large factors, odd sizes, 1 -> n, one axis up and the other down or unchanged. */
const CASES: [number, number, number, number][] = [
  [1224, 816, 1024, 1024], // a 1 MP landscape photo to the model's input: x down, y up
  [816, 1224, 1024, 1024], // portrait: x up, y down
  [1024, 816, 1024, 1024], // y up, x unchanged
  [816, 1024, 1024, 1024], // x up, y unchanged
  [256, 256, 1061, 707], // both up, large factors (the mask to a 12 MP output, scaled down)
  [1024, 1024, 4243, 2830], // both up: the model's grid to a 12 MP photo
  [37, 23, 101, 59], // odd sizes, both up
  [33, 17, 34, 18], // by one pixel
  [1, 1, 7, 5], // one pixel
  [1, 9, 13, 9], // 1 -> n on x
  [9, 1, 9, 11], // 1 -> n on y
  [3, 2, 1000, 3], // tiny to wide
  [640, 480, 300, 1000], // x down a lot, y up
  [500, 90, 501, 1200], // x up by one, y up a lot
  [5, 40, 6, 41], // rows of 18 samples: the SIMD steps overlap at once
  [2, 3, 5, 4], // rows too short for SIMD (JavaScript either way)
  [4, 30, 4, 50], // x unchanged, rows just long enough for the SIMD half-pixel pass (3 channels)
  [6, 20, 16, 30], // x up, rows of exactly 16 samples with 1 channel: SIMD along x, clamped taps at both ends
  [13, 11, 29, 11], // x up, y unchanged: 87 samples per RGB row, the last step of 8 overlapping
];

describe('enlargeBicubic: byte-identical to sharp (libvips) fit fill resizes that enlarge', () => {
  for (const channels of [3, 1] as const) {
    for (const [width, height, outWidth, outHeight] of CASES) {
      it(`${width}x${height} -> ${outWidth}x${outHeight}, ${channels} channel(s)`, async () => {
        const src = picture(width, height, channels, width * 31 + height * 7 + channels);
        const expected = await sharpFill(src, width, height, channels, outWidth, outHeight);
        // WebAssembly SIMD where the rows are long enough, and the JavaScript loops alone.
        // Where x grows and a row holds at least 16 samples, the SIMD run must take colsFromPlan.
        const alongX = outWidth > width && outWidth * channels >= 16;
        for (const simd of [true, false]) {
          const before = kernelCalls['enlargeBicubic.simdAlongX'] ?? 0;
          const got = await split(src, width, height, channels, outWidth, outHeight, simd);
          expect((kernelCalls['enlargeBicubic.simdAlongX'] ?? 0) - before, 'SIMD along x ran').toBe(simd && alongX ? 1 : 0);
          expect(got.length).toBe(outWidth * outHeight * channels);
          let differ = 0;
          for (let i = 0; i < got.length; i++) if (got[i] !== expected[i]) differ++;
          expect(differ, simd ? 'with SIMD' : 'in JavaScript').toBe(0);
        }
      });
    }
  }

  // After a quarter turn libvips makes the resize's output in 128-wide tiles, and the affine's x
  // position starts afresh at each tile's left edge: enlargeBicubic's tileWidth does the same.
  for (const [width, height, outWidth, outHeight] of [[451, 300, 1024, 1024], [191, 250, 1024, 1024], [700, 1219, 1024, 1219], [37, 23, 301, 59]] as const) {
    it(`${width}x${height} -> ${outWidth}x${outHeight} after a quarter turn: in tiles ${ENLARGE_TILE_WIDTH} wide, 3 and 1 channel(s)`, async () => {
      for (const channels of [3, 1] as const) {
        // Stored on its side; libvips turns it (rot90, small tiles) before the pre-resize extract.
        const upright = picture(width, height, channels, width + height + channels);
        const turnedBack = sharp(upright, { raw: { width, height, channels } }).rotate(270);
        const stored = await (channels === 1 ? turnedBack.extractChannel(0) : turnedBack).raw().toBuffer();
        const turned = sharp(stored, { raw: { width: height, height: width, channels } }).rotate(90).extract({ left: 0, top: 0, width, height });
        expect((await (channels === 1 ? turned.clone().extractChannel(0) : turned.clone()).raw().toBuffer()).equals(upright), 'the turn').toBe(true);
        const resized = turned.resize(outWidth, outHeight, { fit: 'fill' });
        const expected = await (channels === 1 ? resized.extractChannel(0) : resized).raw().toBuffer();
        for (const simd of [true, false]) {
          const got = enlargeBicubic(upright, width, height, channels, outWidth, outHeight, { simd, tileWidth: ENLARGE_TILE_WIDTH });
          let differ = 0;
          for (let i = 0; i < got.length; i++) if (got[i] !== expected[i]) differ++;
          expect(differ, `${channels} channel(s), ${simd ? 'with SIMD' : 'in JavaScript'}`).toBe(0);
        }
      }
    });
  }

  it('runs the WebAssembly SIMD kernels on this Node (so the SIMD half of each case above is not the JavaScript again)', () => {
    expect(enlargesWithSimd()).toBe(true);
  });

  it('refuses a shrinking axis and a buffer of the wrong size', () => {
    expect(() => enlargeBicubic(Buffer.alloc(12), 2, 2, 3, 1, 4)).toThrow(RangeError);
    expect(() => enlargeBicubic(Buffer.alloc(11), 2, 2, 3, 4, 4)).toThrow(RangeError);
  });
});

/** sharp's one call from encoded bytes, as the request path made the model's input before enlargeBicubic. */
async function sharpModelInput(bytes: Buffer, hasAlpha: boolean, region?: { left: number; top: number; width: number; height: number }): Promise<Buffer> {
  const decoder = sharp(bytes, { failOn: 'error', autoOrient: true }).toColourspace('srgb');
  const opaque = hasAlpha ? decoder.flatten({ background: '#ffffff' }) : decoder.removeAlpha();
  return (region ? opaque.extract(region) : opaque).resize(ISNET_PROFILE.width, ISNET_PROFILE.height, { fit: 'fill' }).raw().toBuffer();
}

describe('the model-input decode: the same bytes as the one-call resize, enlarged in JS only where that is exact', () => {
  const limits = { maxInputPixels: 100e6 };
  const rgb = picture(900, 600, 3, 5);
  const encode = (pipeline: sharp.Sharp) => pipeline.toBuffer();
  const raw = (channels: 1 | 3 | 4, width = 900, height = 600) => sharp(channels === 3 ? rgb : picture(width, height, channels, 9), { raw: { width, height, channels } });
  // [name, bytes, whether enlargeBicubic runs]
  const inputs: [string, () => Promise<Buffer>, boolean][] = [
    ['an 8-bit JPEG, y grows', () => encode(raw(3).jpeg({ quality: 90 })), true],
    ['a grey JPEG', () => encode(raw(1).jpeg({ quality: 90 })), true],
    ['an RGBA PNG (flattened first)', () => encode(raw(4).png()), true],
    // sharp resizes before turning: enlarged in the stored frame, then turned (resizeFillRgbTurned).
    ['a JPEG with EXIF orientation 6', () => encode(raw(3).jpeg({ quality: 90 }).withMetadata({ orientation: 6 })), true],
    // resized in 16 bits before the cast to 8: the one call stays.
    ['a 16-bit PNG', () => encode(raw(3).toColourspace('rgb16').png()), false],
  ];
  for (const [name, make, split] of inputs) {
    it(name, async () => {
      const bytes = await make();
      const probe = await probeImage(bytes, limits);
      const before = kernelCalls.enlargeBicubic ?? 0;
      const got = await decodeForModel(bytes, probe, limits, ISNET_PROFILE);
      expect((kernelCalls.enlargeBicubic ?? 0) - before).toBe(split ? 1 : 0);
      expect(got.equals(await sharpModelInput(bytes, probe.hasAlpha))).toBe(true);
    });
  }

  // Every EXIF orientation: sharp reduces and enlarges in the stored frame, then turns; so must the split.
  // [stored width, height, channels]: y grows, x grows, both grow, and a strong shrink (JPEG shrink-on-load) beside a growth.
  const turnedSizes: [number, number, 1 | 3 | 4][] = [[900, 600, 3], [600, 900, 3], [500, 400, 3], [2600, 700, 3], [700, 2600, 3], [640, 480, 1], [500, 380, 4]];
  for (const [width, height, channels] of turnedSizes) {
    it(`${width}x${height} (${channels} channel(s)) stored, EXIF orientations 2-8: the model input is sharp's bytes, enlarged by the split`, async () => {
      for (let orientation = 2; orientation <= 8; orientation++) {
        const pixels = sharp(picture(width, height, channels, orientation), { raw: { width, height, channels } });
        const bytes = await encode(channels === 4 ? pixels.png().withMetadata({ orientation }) : pixels.jpeg({ quality: 90 }).withMetadata({ orientation }));
        const probe = await probeImage(bytes, limits);
        expect(probe.orientation).toBe(orientation);
        const before = kernelCalls.enlargeBicubic ?? 0;
        const got = await decodeForModel(bytes, probe, limits, ISNET_PROFILE);
        expect((kernelCalls.enlargeBicubic ?? 0) - before, `orientation ${orientation}: split`).toBe(1);
        expect(got.equals(await sharpModelInput(bytes, probe.hasAlpha)), `orientation ${orientation}: sharp's bytes`).toBe(true);
      }
    });
  }

  // best's region passes: sharp turns the image upright before a pre-resize extract, so a region
  // is resized in the upright frame; the whole image (no extract) in its stored frame. Both split.
  for (const [width, height, channels] of turnedSizes) {
    it(`${width}x${height} (${channels} channel(s)) stored, EXIF orientations 2-8: best's region passes are sharp's bytes, enlarged by the split`, async () => {
      for (let orientation = 2; orientation <= 8; orientation++) {
        const pixels = sharp(picture(width, height, channels, orientation + 20), { raw: { width, height, channels } });
        const bytes = await encode(channels === 4 ? pixels.png().withMetadata({ orientation }) : pixels.jpeg({ quality: 90 }).withMetadata({ orientation }));
        const probe = await probeImage(bytes, limits);
        const [uw, uh] = [probe.width, probe.height];
        // An off-centre crop, one touching the far corner, and the whole image.
        const regions = [
          { left: Math.floor(uw / 7), top: Math.floor(uh / 5), width: Math.floor(uw / 2) + 1, height: Math.floor(uh / 2) },
          { left: uw - Math.floor(uw / 3), top: uh - Math.floor((uh * 3) / 4), width: Math.floor(uw / 3), height: Math.floor((uh * 3) / 4) },
          { left: 0, top: 0, width: uw, height: uh },
        ];
        for (const region of regions) {
          const whole = region.width === uw && region.height === uh;
          const before = kernelCalls.enlargeBicubic ?? 0;
          const pass = await preparePassInputs({ profile: ISNET_PROFILE, source: { bytes, probe, limits, region }, plain: false, mirror: false });
          const at = `orientation ${orientation}, ${JSON.stringify(region)}`;
          expect((kernelCalls.enlargeBicubic ?? 0) - before, `${at}: split`).toBe(1);
          // sharp's one call as the pass made it before the split: the whole image without an extract.
          expect(pass.rgb.equals(await sharpModelInput(bytes, probe.hasAlpha, whole ? undefined : region)), `${at}: sharp's bytes`).toBe(true);
        }
      }
    });
  }

  it('from the full-size decode, and a region of best\'s passes', async () => {
    const bytes = await raw(3).jpeg({ quality: 90 }).toBuffer();
    const probe = await probeImage(bytes, limits);
    const decoded = await decodeRaw(bytes, probe, limits);
    const expected = await sharpModelInput(bytes, false);
    expect((await decodeForModel(bytes, probe, limits, ISNET_PROFILE, decoded)).equals(expected)).toBe(true);
    const region = { left: 150, top: 100, width: 500, height: 300 };
    const before = kernelCalls.enlargeBicubic ?? 0;
    const pass = await preparePassInputs({ profile: ISNET_PROFILE, source: { bytes, probe, limits, region }, plain: false, mirror: false });
    expect((kernelCalls.enlargeBicubic ?? 0) - before).toBe(1);
    expect(pass.rgb.equals(await sharpModelInput(bytes, false, region))).toBe(true);
  });
});
