import { describe, expect, it } from 'vitest';
import { clearTransparent, composeOpaque, foregroundBox, FOREGROUND_THRESHOLD } from '../src/core/image/output.js';
import { kernelCalls } from '../src/core/image/kernel-calls.js';
import { upscalesWithSimd } from '../src/core/image/mask-upscale.js';
import { upscaleMask } from '../src/core/image/tensor.js';

/**
 * The per-pixel passes that run at full output size take shortcuts (flat rows and runs filled at
 * once, four pixels tested at a time). Each must give exactly what the plain per-pixel formula
 * gives; these references are that formula, written the obvious way.
 */
function referenceUpscale(src: Buffer, sw: number, sh: number, width: number, height: number): Buffer {
  const out = Buffer.alloc(width * height);
  const sx = width > 1 ? (sw - 1) / (width - 1) : 0;
  const sy = height > 1 ? (sh - 1) / (height - 1) : 0;
  for (let y = 0; y < height; y++) {
    const fy = y * sy;
    const r0 = Math.floor(fy);
    const r1 = Math.min(sh - 1, r0 + 1);
    const wy = Math.round((fy - r0) * 256);
    for (let x = 0; x < width; x++) {
      const fx = x * sx;
      const c0 = Math.floor(fx);
      const c1 = Math.min(sw - 1, c0 + 1);
      const w = Math.round((fx - c0) * 256);
      const top = src[r0 * sw + c0]! * (256 - w) + src[r0 * sw + c1]! * w;
      const bottom = src[r1 * sw + c0]! * (256 - w) + src[r1 * sw + c1]! * w;
      out[y * width + x] = (top * (256 - wy) + bottom * wy + 32768) >>> 16;
    }
  }
  return out;
}

function referenceBox(alpha: Buffer, width: number, height: number) {
  let top = height;
  let bottom = -1;
  let left = width;
  let right = -1;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      if (alpha[y * width + x]! < FOREGROUND_THRESHOLD) continue;
      top = Math.min(top, y);
      bottom = Math.max(bottom, y);
      left = Math.min(left, x);
      right = Math.max(right, x);
    }
  }
  return bottom < 0 ? null : { top, left, width: right - left + 1, height: bottom - top + 1 };
}

/** A deterministic mask like a model's: flat 0 and 255 areas, soft edges, specks of noise. */
function maskLike(width: number, height: number, seed: number): Buffer {
  let state = seed;
  const random = () => ((state = (state * 1103515245 + 12345) >>> 0) / 2 ** 32);
  const mask = Buffer.alloc(width * height);
  const cx = width * (0.3 + 0.4 * random());
  const cy = height * (0.3 + 0.4 * random());
  const r = Math.min(width, height) * (0.15 + 0.2 * random());
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const d = Math.hypot(x - cx, y - cy) - r;
      mask[y * width + x] = d < -2 ? 255 : d > 2 ? 0 : Math.round(255 * (2 - d) / 4);
      if (random() < 0.002) mask[y * width + x] = Math.floor(random() * 256);
    }
  }
  return mask;
}

/** The same bytes at an offset that is not a multiple of four (as a pooled Buffer may be). */
function unaligned(bytes: Buffer): Buffer {
  const backing = Buffer.alloc(bytes.length + 1);
  bytes.copy(backing, 1);
  return backing.subarray(1);
}

describe('full-size kernels give exactly the per-pixel formula', () => {
  const cases: Array<[number, number, number, number]> = [
    [64, 48, 1000, 667], // upscale, as for a photo
    [64, 48, 2000, 1333], // a large upscale: flat stretches longer than one native fill's threshold
    [64, 48, 333, 501], // odd sizes
    [64, 48, 40, 30], // downscale (a crop region smaller than the model's size)
    [17, 13, 17, 13], // same size
    [1, 1, 5, 3], // one source pixel
    [64, 48, 1, 1],
  ];
  it.each(cases)('upscaleMask %ix%i to %ix%i', (sw, sh, width, height) => {
    for (let seed = 1; seed <= 3; seed++) {
      const src = maskLike(sw, sh, seed);
      expect(upscaleMask(src, sw, sh, width, height).equals(referenceUpscale(src, sw, sh, width, height))).toBe(true);
    }
  });

  // The WebAssembly SIMD path (mask-upscale.wat) against the JavaScript loops it replaces (and
  // both against the formula): masks like a model's and bytes at random (no flat stretches),
  // sizes whose width is and is not a multiple of 8 and 16, downscales the SIMD path takes and
  // ones it leaves to JavaScript, into a used buffer and a fresh one.
  const simdCases: Array<[number, number, number, number, boolean]> = [
    [1024, 1024, 1224, 816, true], // the model's mask to a 1 MP landscape photo
    [1024, 1024, 816, 1224, true], // portrait: x shrinks by less than 2
    [1024, 1024, 1500, 1125, true],
    [320, 320, 4243, 2830, true], // a large upscale (a 12 MP photo from a small grid)
    [64, 48, 1000, 667, true],
    [20, 15, 16, 12, true], // the narrowest output it takes
    [24, 13, 17, 9, true], // a last step overlapping the one before
    [30, 20, 23, 40, true],
    [1, 1, 40, 3, true], // one source pixel
    [1024, 1024, 500, 400, false], // x shrinks by more than 2: left to JavaScript
    [64, 48, 15, 30, false], // narrower than 16: JavaScript
  ];
  it.each(simdCases)('upscaleMask in WebAssembly SIMD: %ix%i to %ix%i gives the JavaScript loops\' bytes (SIMD taken: %s)', (sw, sh, width, height, taken) => {
    expect(upscalesWithSimd()).toBe(true);
    let state = sw * 7919 + width;
    const random = () => ((state = (state * 1103515245 + 12345) >>> 0) >>> 24);
    const noise = Buffer.alloc(sw * sh);
    for (let i = 0; i < noise.length; i++) noise[i] = random();
    for (const src of [maskLike(sw, sh, 5), noise, unaligned(noise)]) {
      const expected = upscaleMask(src, sw, sh, width, height, undefined, { simd: false });
      const before = kernelCalls['upscaleMask.simd'] ?? 0;
      expect(upscaleMask(src, sw, sh, width, height).equals(expected)).toBe(true);
      const used = Buffer.alloc(width * height, 0x5a);
      expect(upscaleMask(src, sw, sh, width, height, used).equals(expected)).toBe(true);
      expect((kernelCalls['upscaleMask.simd'] ?? 0) - before).toBe(taken ? 2 : 0);
      if (width * height < 2_000_000) expect(expected.equals(referenceUpscale(src, sw, sh, width, height))).toBe(true);
    }
  });

  it('foregroundBox: any size, aligned or not, empty or not', () => {
    for (const [width, height] of [[1000, 667], [333, 501], [7, 5], [1, 1]] as const) {
      for (let seed = 1; seed <= 3; seed++) {
        const alpha = maskLike(width, height, seed);
        expect(foregroundBox(alpha, width, height)).toEqual(referenceBox(alpha, width, height));
        expect(foregroundBox(unaligned(alpha), width, height)).toEqual(referenceBox(alpha, width, height));
      }
      const below = Buffer.alloc(width * height, FOREGROUND_THRESHOLD - 1);
      expect(foregroundBox(below, width, height)).toBeNull();
    }
  });

  it('clearTransparent clears the colour of exactly the alpha-0 pixels', () => {
    for (const [width, height] of [[1000, 667], [333, 501], [7, 5]] as const) {
      const alpha = maskLike(width, height, 7);
      for (const a of [alpha, unaligned(alpha)]) {
        const rgb = Buffer.alloc(width * height * 3);
        for (let i = 0; i < rgb.length; i++) rgb[i] = 1 + (i % 250);
        const expected = Buffer.from(rgb);
        for (let i = 0; i < a.length; i++) if (a[i] === 0) expected.fill(0, i * 3, i * 3 + 3);
        expect(clearTransparent(rgb, a).equals(expected)).toBe(true);
      }
    }
  });

  it('composeOpaque: every pixel is round(c * a + bg * (1 - a)), in place or into a new buffer', () => {
    const background = { r: 30, g: 144, b: 255, alpha: 1 };
    const bg = [background.r, background.g, background.b];
    for (const [width, height] of [[1000, 667], [333, 501], [7, 5]] as const) {
      const alpha = maskLike(width, height, 11);
      const rgb = Buffer.alloc(width * height * 3);
      for (let i = 0; i < rgb.length; i++) rgb[i] = (i * 7) % 256;
      const expected = Buffer.alloc(rgb.length);
      for (let i = 0; i < alpha.length; i++) {
        const a = alpha[i]! / 255;
        for (let c = 0; c < 3; c++) expected[i * 3 + c] = Math.round(rgb[i * 3 + c]! * a + bg[c]! * (1 - a));
      }
      for (const a of [alpha, unaligned(alpha)]) {
        expect(composeOpaque(rgb, a, background).equals(expected)).toBe(true);
        expect(composeOpaque(Buffer.from(rgb), a, background, undefined).equals(expected)).toBe(true);
        const inPlace = Buffer.from(rgb);
        expect(composeOpaque(inPlace, a, background, inPlace).equals(expected)).toBe(true);
      }
    }
  });
});
