import { describe, expect, it } from 'vitest';
import { estimateForeground } from '../src/core/image/foreground.js';

/**
 * A known answer: an object of colour F over a background of colour B, with a soft alpha ramp
 * between them (hair-like), mixed as I = aF + (1-a)B. The cutout's colour at soft pixels should
 * be F, not I: I carries the old background into the cutout.
 */
function softEdgeScene(width: number, height: number) {
  const F = (x: number, y: number) => [200 + 40 * Math.sin(y / 9), 150, 60 + 30 * Math.cos(x / 13)];
  const B = (x: number, y: number) => [30 + 20 * Math.sin(x / 7), 90 + 40 * Math.cos(y / 11), 220];
  const rgb = Buffer.alloc(width * height * 3);
  const alpha = Buffer.alloc(width * height);
  const truth = new Float32Array(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = y * width + x;
      // Opaque on the left, clear on the right, a wavy soft band 24 px wide between.
      const edge = width / 2 + 20 * Math.sin(y / 15);
      const a = Math.max(0, Math.min(1, 0.5 - (x - edge) / 24));
      alpha[i] = Math.round(a * 255);
      const f = F(x, y);
      const b = B(x, y);
      for (let c = 0; c < 3; c++) {
        truth[i * 3 + c] = f[c]!;
        rgb[i * 3 + c] = Math.round((alpha[i]! / 255) * f[c]! + (1 - alpha[i]! / 255) * b[c]!);
      }
    }
  }
  return { rgb, alpha, truth };
}

function softError(colour: Buffer, alpha: Buffer, truth: Float32Array): number {
  let sum = 0;
  let count = 0;
  for (let i = 0; i < alpha.length; i++) {
    const a = alpha[i]!;
    if (a === 0 || a === 255) continue;
    // Weighted by alpha: what shows in a composite is a * F.
    for (let c = 0; c < 3; c++) sum += (a / 255) * Math.abs(colour[i * 3 + c]! - truth[i * 3 + c]!);
    count += 3;
  }
  return sum / count;
}

describe('foreground colour estimation', () => {
  it('takes most of the old background out of soft edges', async () => {
    const { rgb, alpha, truth } = softEdgeScene(600, 400);
    const before = softError(rgb, alpha, truth);
    const estimated = await estimateForeground(Buffer.from(rgb), alpha, 600, 400);
    const after = softError(estimated, alpha, truth);
    console.log(`foreground estimation: mean alpha-weighted colour error at soft pixels ${before.toFixed(2)} -> ${after.toFixed(2)} (of 255)`);
    expect(after).toBeLessThan(before * 0.5);
  });

  it('leaves opaque and transparent pixels alone', async () => {
    const { rgb, alpha } = softEdgeScene(300, 200);
    const estimated = await estimateForeground(Buffer.from(rgb), alpha, 300, 200);
    for (let i = 0; i < alpha.length; i++) {
      if (alpha[i] === 0 || alpha[i] === 255) {
        expect(estimated.subarray(i * 3, i * 3 + 3)).toEqual(rgb.subarray(i * 3, i * 3 + 3));
      }
    }
  });

  it('works at a size far above its working resolution', async () => {
    const { rgb, alpha, truth } = softEdgeScene(2400, 1600);
    const after = softError(await estimateForeground(Buffer.from(rgb), alpha, 2400, 1600), alpha, truth);
    expect(after).toBeLessThan(softError(rgb, alpha, truth) * 0.5);
  });

  it('leaves the image untouched under a hard mask (no soft pixel, nothing to estimate)', async () => {
    const { rgb } = softEdgeScene(300, 200);
    const hard = Buffer.alloc(300 * 200);
    for (let i = 0; i < hard.length; i++) hard[i] = i % 300 < 150 ? 255 : 0;
    const estimated = await estimateForeground(Buffer.from(rgb), hard, 300, 200);
    expect(estimated.equals(rgb)).toBe(true);
    // One soft pixel is enough for the estimate to run and change it.
    hard[100 * 300 + 150] = 128;
    expect((await estimateForeground(Buffer.from(rgb), hard, 300, 200)).equals(rgb)).toBe(false);
  });
});
