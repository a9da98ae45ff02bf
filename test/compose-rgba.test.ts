import { describe, expect, it } from 'vitest';
import { composeRgba } from '../src/core/image/output.js';

/**
 * composeRgba's no-background path builds four pixels at a time from three colour words and one
 * alpha word (little-endian, aligned), the rest one by one. Checked against the rule written
 * per pixel here: RGBA = colour and alpha, and all four bytes 0 where alpha is 0.
 */
function reference(rgb: Buffer, alpha: Buffer): Buffer {
  const out = Buffer.alloc(alpha.length * 4);
  for (let i = 0; i < alpha.length; i++) {
    if (alpha[i] === 0) continue;
    out[i * 4] = rgb[i * 3]!;
    out[i * 4 + 1] = rgb[i * 3 + 1]!;
    out[i * 4 + 2] = rgb[i * 3 + 2]!;
    out[i * 4 + 3] = alpha[i]!;
  }
  return out;
}

let seed = 7;
const random = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);

/** `pixels` of random colour at `offset` bytes into their memory; alpha in runs of 0, 255 and soft values. */
function sample(pixels: number, offset: number) {
  const rgb = Buffer.from(new ArrayBuffer(pixels * 3 + offset), offset, pixels * 3);
  for (let i = 0; i < rgb.length; i++) rgb[i] = Math.floor(random() * 256);
  const alpha = Buffer.alloc(pixels);
  for (let i = 0; i < pixels; ) {
    const run = 1 + Math.floor(random() * 12);
    const kind = random();
    for (let k = 0; k < run && i < pixels; k++, i++) alpha[i] = kind < 0.4 ? 0 : kind < 0.7 ? 255 : Math.floor(random() * 256);
  }
  return { rgb, alpha };
}

describe('composeRgba without a background', () => {
  it('gives the per-pixel rule\'s bytes for every size and alignment, four pixels at a time or one', () => {
    for (const pixels of [1, 3, 4, 5, 8, 1001, 4096, 12_347]) {
      for (const offset of [0, 1, 4]) {
        const { rgb, alpha } = sample(pixels, offset);
        const expected = reference(rgb, alpha);
        expect(composeRgba(rgb, alpha, null).equals(expected), `${pixels} pixels, colour at +${offset}`).toBe(true);
        // Into a buffer holding other bytes (a reused one): every byte is written.
        const into = Buffer.alloc(pixels * 4, 0xa5);
        expect(composeRgba(rgb, alpha, null, into).equals(expected), `${pixels} pixels into a used buffer`).toBe(true);
      }
    }
  });
});
