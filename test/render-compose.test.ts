import { describe, expect, it } from 'vitest';
import { softBounds } from '../src/core/image/foreground.js';
import { pasteBlended, splitAlpha } from '../src/core/image/full-size-mask.js';
import { kernelCalls } from '../src/core/image/kernel-calls.js';
import { composeOpaque, composeRgba, foregroundBox } from '../src/core/image/output.js';
import { composesWithSimd } from '../src/core/image/render-compose.js';
import { sharedBuffer } from '../src/core/image/shared-bytes.js';

/**
 * The render's kernels in WebAssembly SIMD (render-compose.wat) against the JavaScript loops they
 * replace (`simd: false`, the reference, itself checked against the per-pixel formulas in
 * full-size-kernels.test.ts and compose-rgba.test.ts): byte for byte, on random bytes and on
 * masks like a model's (flat 0 and 255, soft edges), at sizes below one 16-pixel step, not a
 * multiple of it, and over several bands of the module's memory (64 Ki pixels), from ordinary,
 * unaligned and shared memory; each asserting the SIMD path ran (kernel-calls.ts).
 */
let state = 1;
const byte = () => ((state = (state * 1103515245 + 12345) >>> 0) >>> 24);
const random = (n: number) => Buffer.from(Array.from({ length: n }, byte));

/** A mask like a model's: a disc, 0 outside and 255 inside, a soft edge, a few random specks. */
function maskLike(width: number, height: number): Buffer {
  const mask = Buffer.alloc(width * height);
  const r = Math.min(width, height) * 0.3;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const d = Math.hypot(x - width / 2, y - height / 2) - r;
      mask[y * width + x] = d < -3 ? 255 : d > 3 ? 0 : Math.round((255 * (3 - d)) / 6);
      if (byte() < 1) mask[y * width + x] = byte();
    }
  }
  return mask;
}

function unaligned(bytes: Buffer): Buffer {
  const backing = Buffer.alloc(bytes.length + 1);
  bytes.copy(backing, 1);
  return backing.subarray(1);
}

function shared(bytes: Buffer): Buffer {
  const copy = sharedBuffer(bytes.length);
  bytes.copy(copy);
  return copy;
}

/** How many times `name` ran in SIMD during `run`. */
function simdCalls(name: string, run: () => void): number {
  const before = kernelCalls[`${name}.simd`] ?? 0;
  run();
  return (kernelCalls[`${name}.simd`] ?? 0) - before;
}

const SIZES: Array<[number, number]> = [
  [1, 1],
  [7, 2], // fewer pixels than one step
  [17, 3], // a step and one pixel
  [333, 501], // over two bands, odd sizes
  [1000, 667],
  [40_000, 2], // rows wider than a band
];

/** Alphas for a size: random bytes, a model-like mask, all 0, all 255. */
function alphas(width: number, height: number): Buffer[] {
  return [random(width * height), maskLike(width, height), Buffer.alloc(width * height), Buffer.alloc(width * height, 255)];
}

describe('render kernels in WebAssembly SIMD give the JavaScript\'s bytes', () => {
  it('this runtime has WebAssembly SIMD', () => {
    expect(composesWithSimd()).toBe(true);
  });

  it.each(SIZES)('composeRgba without a background, %ix%i', (width, height) => {
    const n = width * height;
    const rgb = random(n * 3);
    for (const alpha of alphas(width, height)) {
      const expected = composeRgba(rgb, alpha, null, undefined, { simd: false });
      for (const [c, a] of [[rgb, alpha], [unaligned(rgb), unaligned(alpha)], [shared(rgb), shared(alpha)]] as const) {
        let got = Buffer.alloc(0);
        expect(simdCalls('composeRgba', () => (got = composeRgba(c, a, null)))).toBe(1);
        expect(got.equals(expected)).toBe(true);
        // Into a used buffer: every byte is written.
        const used = Buffer.alloc(n * 4, 0x5a);
        expect(composeRgba(c, a, null, used).equals(expected)).toBe(true);
      }
    }
  });

  it.each(SIZES)('composeRgba over a translucent colour, %ix%i', (width, height) => {
    const n = width * height;
    const rgb = random(n * 3);
    for (const alpha of [...alphas(width, height), Buffer.from(Array.from({ length: n }, (_, i) => i & 255))]) {
      for (const background of [{ r: 30, g: 144, b: 255, alpha: 0.5 }, { r: 255, g: 0, b: 7, alpha: 1 / 3 }, { r: 9, g: 9, b: 9, alpha: 0 }, { r: 200, g: 100, b: 50, alpha: 0.999 }]) {
        const expected = composeRgba(rgb, alpha, background, undefined, { simd: false });
        let got = Buffer.alloc(0);
        expect(simdCalls('composeRgba', () => (got = composeRgba(shared(rgb), unaligned(alpha), background)))).toBe(1);
        expect(got.equals(expected)).toBe(true);
      }
    }
  });

  it('composeRgba over a translucent colour: every colour and alpha byte, 64 colours', () => {
    const n = 1 << 16;
    const rgb = Buffer.alloc(n * 3);
    const alpha = Buffer.alloc(n);
    for (let i = 0; i < n; i++) {
      rgb[i * 3] = rgb[i * 3 + 1] = rgb[i * 3 + 2] = i & 255;
      alpha[i] = i >> 8;
    }
    for (let k = 0; k < 64; k++) {
      const background = { r: byte(), g: byte(), b: byte(), alpha: byte() / 255 };
      if (!composeRgba(rgb, alpha, background).equals(composeRgba(rgb, alpha, background, undefined, { simd: false }))) expect.fail(JSON.stringify(background));
    }
  });

  it.each(SIZES)('composeOpaque, %ix%i, into a new buffer and in place', (width, height) => {
    const n = width * height;
    const rgb = random(n * 3);
    for (const background of [{ r: 30, g: 144, b: 255, alpha: 1 }, { r: 0, g: 0, b: 0, alpha: 1 }, { r: 255, g: 255, b: 255, alpha: 1 }]) {
      for (const alpha of alphas(width, height)) {
        const expected = composeOpaque(rgb, alpha, background, undefined, { simd: false });
        let got = Buffer.alloc(0);
        expect(simdCalls('composeOpaque', () => (got = composeOpaque(rgb, unaligned(alpha), background)))).toBe(1);
        expect(got.equals(expected)).toBe(true);
        const inPlace = shared(rgb);
        expect(composeOpaque(inPlace, alpha, background, inPlace).equals(expected)).toBe(true);
      }
    }
  });

  it('composeOpaque: every colour, alpha and background byte (256^3 pixels)', () => {
    // The integer rounding the kernel uses against the JavaScript's doubles, exhaustively.
    const n = 1 << 16;
    const rgb = Buffer.alloc(n * 3);
    const alpha = Buffer.alloc(n);
    for (let i = 0; i < n; i++) {
      rgb[i * 3] = rgb[i * 3 + 1] = rgb[i * 3 + 2] = i & 255;
      alpha[i] = i >> 8;
    }
    for (let bg = 0; bg < 256; bg++) {
      const background = { r: bg, g: 255 - bg, b: bg ^ 0x55, alpha: 1 };
      const expected = composeOpaque(rgb, alpha, background, undefined, { simd: false });
      if (!composeOpaque(rgb, alpha, background).equals(expected)) expect.fail(`background ${bg}`);
    }
  });

  it.each(SIZES)('splitAlpha, %ix%i', (width, height) => {
    const n = width * height;
    for (const rgba of [random(n * 4), unaligned(random(n * 4))]) {
      for (const alpha of alphas(width, height)) {
        const jsMask = Buffer.from(alpha);
        const expected = splitAlpha(rgba, jsMask, { simd: false });
        const mask = shared(alpha);
        let got = Buffer.alloc(0);
        expect(simdCalls('splitAlpha', () => (got = splitAlpha(rgba, mask)))).toBe(1);
        expect(got.equals(expected)).toBe(true);
        expect(mask.equals(jsMask)).toBe(true);
      }
    }
  });

  it.each(SIZES)('foregroundBox and softBounds, %ix%i', (width, height) => {
    for (const alpha of [...alphas(width, height), Buffer.alloc(width * height, 12), Buffer.alloc(width * height, 13)]) {
      // One foreground pixel at each corner in turn, on a background just under the threshold.
      for (const a of [alpha, unaligned(alpha)]) {
        expect(simdCalls('foregroundBox', () => expect(foregroundBox(a, width, height)).toEqual(foregroundBox(a, width, height, { simd: false })))).toBe(1);
        expect(simdCalls('softBounds', () => expect(softBounds(a, width, height)).toEqual(softBounds(a, width, height, undefined, { simd: false })))).toBe(1);
        const rows = { top: Math.floor(height / 3), bottom: Math.ceil(height / 2) };
        expect(softBounds(a, width, height, rows)).toEqual(softBounds(a, width, height, rows, { simd: false }));
      }
    }
    for (const at of [0, width - 1, (height - 1) * width, width * height - 1]) {
      const one = Buffer.alloc(width * height, 12);
      one[at] = 200;
      expect(foregroundBox(one, width, height)).toEqual(foregroundBox(one, width, height, { simd: false }));
      expect(softBounds(one, width, height)).toEqual(softBounds(one, width, height, undefined, { simd: false }));
    }
  });

  it('pasteBlended\'s replace merge: regions inside, at the borders, one row or column, over several bands', () => {
    const cases: Array<[number, number, { left: number; top: number; width: number; height: number }, number]> = [
      [1224, 816, { left: 200, top: 80, width: 800, height: 700 }, 80], // a crop inside a 1 MP photo
      [100, 60, { left: 0, top: 0, width: 100, height: 60 }, 7], // the whole image: no ramp
      [100, 60, { left: 0, top: 20, width: 61, height: 40 }, 9.5], // at the left and bottom borders
      [100, 60, { left: 3, top: 5, width: 17, height: 1 }, 3],
      [50, 50, { left: 10, top: 0, width: 1, height: 50 }, 2.5],
      [300, 200, { left: 1, top: 10, width: 299, height: 190 }, 13.7],
    ];
    for (const [width, height, region, ramp] of cases) {
      for (const alpha of [random(width * height), maskLike(width, height)]) {
        const part = random(region.width * region.height);
        const expected = pasteBlended(alpha, width, height, part, region, ramp, 'replace', 1, { simd: false });
        let got = Buffer.alloc(0);
        expect(simdCalls('pasteBlended', () => (got = pasteBlended(shared(alpha), width, height, unaligned(part), region, ramp, 'replace')))).toBe(1);
        expect(got.equals(expected), `${width}x${height} ${JSON.stringify(region)}`).toBe(true);
      }
    }
    // The other merges stay JavaScript.
    const alpha = random(100 * 60);
    expect(simdCalls('pasteBlended', () => pasteBlended(alpha, 100, 60, random(50 * 30), { left: 10, top: 10, width: 50, height: 30 }, 5, 'max'))).toBe(0);
  });
});
