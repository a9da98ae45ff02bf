import { describe, expect, it } from 'vitest';
import { cutoutConfidence } from '../src/core/image/confidence.js';

/** A w x h mask: `inside` in a centred disc of radius r, `ring` within 3 px outside it, 0 elsewhere. */
function disc(w: number, h: number, r: number, inside: number, ring = 0): Buffer {
  const mask = Buffer.alloc(w * h);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const d = Math.hypot(x - w / 2, y - h / 2);
      mask[y * w + x] = d <= r ? inside : d <= r + 3 ? ring : 0;
    }
  }
  return mask;
}
const whole = (mask: Buffer, w: number, h: number) => ({ mask, width: w, height: h, box: { left: 0, top: 0, width: w, height: h } });

describe('cutout confidence', () => {
  it('is 1 for a clean, decided mask and falls with the share of unsure pixels', () => {
    expect(cutoutConfidence(disc(100, 100, 30, 255), 100, 100)).toBe(1);
    const soft = cutoutConfidence(disc(100, 100, 30, 255, 128), 100, 100);
    const softer = cutoutConfidence(disc(100, 100, 20, 255, 128), 100, 100);
    expect(soft).toBeLessThan(1);
    expect(soft).toBeGreaterThan(0.5);
    // The same soft rim on a smaller object is a larger share of it.
    expect(softer).toBeLessThan(soft);
    // A mask unsure everywhere it sees something.
    expect(cutoutConfidence(disc(100, 100, 30, 150), 100, 100)).toBe(0);
  });

  it('counts every mask value on the right side of the thresholds, aligned or not', () => {
    // Each value 0..255 three times, shuffled, in a buffer that starts off a 4-byte boundary
    // and whose length is no multiple of 4: 202 values (27..228) are unsure, 27 (229..255)
    // sure foreground.
    const values = Array.from({ length: 256 * 3 }, (_, i) => i % 256);
    for (let i = values.length - 1; i > 0; i--) {
      const j = (i * 7919) % (i + 1);
      [values[i], values[j]] = [values[j]!, values[i]!];
    }
    const backing = Buffer.alloc(values.length + 1 + 3);
    const mask = backing.subarray(1, 1 + values.length + 3);
    mask.set(values);
    // Three trailing zeros make the length 771 (not a multiple of 4).
    expect(cutoutConfidence(mask, 771, 1)).toBeCloseTo(1 - 202 / 229, 12);
    const aligned = Buffer.alloc(772);
    aligned.set(values);
    expect(cutoutConfidence(aligned, 772, 1)).toBeCloseTo(1 - 202 / 229, 12);
  });

  it('is 0 when nothing was found', () => {
    expect(cutoutConfidence(Buffer.alloc(64 * 64), 64, 64)).toBe(0);
  });

  it('counts pixels where two looks fall on different sides of one half as unsure, on the final grid', () => {
    const a = disc(100, 100, 30, 255);
    const b = disc(100, 100, 25, 255);
    const agree = cutoutConfidence(a, 100, 100, [whole(a, 100, 100), whole(a, 100, 100)]);
    const differ = cutoutConfidence(a, 100, 100, [whole(a, 100, 100), whole(b, 100, 100)]);
    expect(agree).toBe(1);
    // The ring between radius 25 and 30 is unsure: (30² - 25²) / 30² of the object.
    expect(differ).toBeCloseTo(1 - (30 ** 2 - 25 ** 2) / 30 ** 2, 1);
    // A look at a region only (a crop at twice the resolution) is compared where it lies.
    // (the grid's box 10..90 at 2x: a disc of radius 25 on the grid, as b)
    const crop = disc(160, 160, 50, 255);
    const withCrop = cutoutConfidence(a, 100, 100, [whole(a, 100, 100), { mask: crop, width: 160, height: 160, box: { left: 10, top: 10, width: 80, height: 80 } }]);
    expect(withCrop).toBeCloseTo(differ, 1);
  });
});
