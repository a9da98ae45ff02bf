import { describe, expect, it } from 'vitest';
import sharp from 'sharp';
import { blurFusionPlanes, estimateForeground, sampleView, sparseSecondPlanes, workingView } from '../src/core/image/foreground.js';
import { blursWithSimd } from '../src/core/image/foreground-blur.js';
import { kernelCalls } from '../src/core/image/kernel-calls.js';

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

/**
 * A photo-like cutout: a blob of object colour (textured) with a soft, hair-like rim of varying
 * width, over a textured background, the blob's centre at (cx, cy) as fractions of the image;
 * parts of the image far from the rim are hard (0 or 255), as in a real mask.
 */
function blobScene(width: number, height: number, cx: number, cy: number, radius: number) {
  const rgb = Buffer.alloc(width * height * 3);
  const alpha = Buffer.alloc(width * height);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = y * width + x;
      const dx = x - cx * width;
      const dy = y - cy * height;
      const angle = Math.atan2(dy, dx);
      // A wavy outline with a rim 3-30 px wide: strands on one side, a crisp edge on the other.
      const edge = radius * (1 + 0.15 * Math.sin(5 * angle));
      const rim = 3 + 27 * (0.5 + 0.5 * Math.sin(angle));
      const a = Math.max(0, Math.min(1, 0.5 - (Math.hypot(dx, dy) - edge) / rim));
      alpha[i] = Math.round(a * 255);
      const f = [180 + 50 * Math.sin(x / 17 + y / 23), 120 + 40 * Math.cos(y / 19), 70 + 30 * Math.sin(x / 11)];
      const b = [40 + 30 * Math.cos(x / 29), 160 + 50 * Math.sin((x + y) / 31), 200 + 40 * Math.cos(y / 13)];
      for (let c = 0; c < 3; c++) rgb[i * 3 + c] = Math.round(a * f[c]! + (1 - a) * b[c]!);
    }
  }
  return { rgb, alpha };
}

describe('foreground estimation restricted to the soft band', () => {
  const cases = [
    { name: 'an object in the middle, estimated at full size', width: 420, height: 280, cx: 0.5, cy: 0.55, radius: 70 },
    { name: 'an object in the middle, far above the working size', width: 900, height: 600, cx: 0.45, cy: 0.5, radius: 150 },
    { name: 'an object cut off by the left and top borders', width: 750, height: 500, cx: 0.05, cy: 0.1, radius: 175 },
    { name: 'a small object in a corner of a large image', width: 1000, height: 700, cx: 0.85, cy: 0.8, radius: 45 },
    // Working size = the image, 1000 wide: the second blur is 6 wide (radius 3), the widest
    // computed point by point.
    { name: 'a wide strip whose second blur is 6 wide', width: 1000, height: 60, cx: 0.5, cy: 0.5, radius: 25 },
    // 4000 wide: the second blur is 24 wide, past the point-by-point pass: whole planes.
    { name: 'a long strip whose second blur is too wide to compute point by point', width: 4000, height: 15, cx: 0.3, cy: 0.5, radius: 7 },
  ];
  for (const c of cases) {
    it(`gives the whole-image estimate's colours exactly: ${c.name}`, async () => {
      const { rgb, alpha } = blobScene(c.width, c.height, c.cx, c.cy, c.radius);
      const banded = await estimateForeground(Buffer.from(rgb), alpha, c.width, c.height, undefined, 'band');
      const whole = await estimateForeground(Buffer.from(rgb), alpha, c.width, c.height, undefined, 'whole');
      expect(banded.equals(whole)).toBe(true);
      // The estimate did something: soft pixels changed colour.
      expect(banded.equals(rgb)).toBe(false);
    });
  }

  it('gives the whole-image estimate exactly from a model-size source view (as the API calls it)', async () => {
    const { rgb, alpha } = blobScene(800, 500, 0.6, 0.5, 125);
    // The API passes the image and mask at the model's size (stretched square) as the source.
    const modelRgb = await sharp(rgb, { raw: { width: 800, height: 500, channels: 3 } }).resize(512, 512, { fit: 'fill' }).raw().toBuffer();
    const modelAlpha = await sharp(alpha, { raw: { width: 800, height: 500, channels: 1 } }).resize(512, 512, { fit: 'fill' }).extractChannel(0).raw().toBuffer();
    const source = { rgb: modelRgb, alpha: modelAlpha, width: 512, height: 512 };
    const banded = await estimateForeground(Buffer.from(rgb), alpha, 800, 500, source, 'band');
    const whole = await estimateForeground(Buffer.from(rgb), alpha, 800, 500, source, 'whole');
    expect(banded.equals(whole)).toBe(true);
  });

  it('samples a larger source view straight into its planes: the same bytes as from the working view sampleView makes of it', async () => {
    // A small blob off-centre: the band's box is a part of the working image, not all of it.
    const { rgb, alpha } = blobScene(900, 600, 0.3, 0.35, 60);
    const modelRgb = await sharp(rgb, { raw: { width: 900, height: 600, channels: 3 } }).resize(640, 640, { fit: 'fill' }).raw().toBuffer();
    const modelAlpha = await sharp(alpha, { raw: { width: 900, height: 600, channels: 1 } }).resize(640, 640, { fit: 'fill' }).extractChannel(0).raw().toBuffer();
    const source = { rgb: modelRgb, alpha: modelAlpha, width: 640, height: 640 };
    const working = await workingView(source, 900, 600);
    expect(working.width * working.height).toBeLessThan(640 * 640);
    for (const region of ['band', 'whole'] as const) {
      const fromSource = await estimateForeground(Buffer.from(rgb), alpha, 900, 600, source, region);
      const fromWorking = await estimateForeground(Buffer.from(rgb), alpha, 900, 600, working, region);
      expect(fromSource.equals(fromWorking)).toBe(true);
      expect(fromSource.equals(rgb)).toBe(false);
    }
  });

  it('changes no opaque or transparent pixel, and most soft pixels', async () => {
    const { rgb, alpha } = blobScene(750, 500, 0.5, 0.5, 125);
    const banded = await estimateForeground(Buffer.from(rgb), alpha, 750, 500);
    let soft = 0;
    let changed = 0;
    let hardChanged = 0;
    for (let i = 0; i < alpha.length; i++) {
      const same = banded[i * 3] === rgb[i * 3] && banded[i * 3 + 1] === rgb[i * 3 + 1] && banded[i * 3 + 2] === rgb[i * 3 + 2];
      if (alpha[i] === 0 || alpha[i] === 255) {
        if (!same) hardChanged++;
      } else {
        soft++;
        if (!same) changed++;
      }
    }
    expect(hardChanged).toBe(0);
    // Most soft pixels carry some background, so most of them change.
    expect(soft).toBeGreaterThan(1000);
    expect(changed / soft).toBeGreaterThan(0.5);
  });
});

/**
 * Blur fusion as the paper writes it (Forte & Pitie 2021, equation 7, two passes), in doubles,
 * every box mean summed directly over its clipped box: a reference written apart from the
 * code under test, for an image no larger than the working size (so that size is the image's
 * own and each soft pixel reads its own working pixel).
 */
function referenceEstimate(rgb: Buffer, alpha: Buffer, w: number, h: number): Buffer {
  const n = w * h;
  const unit = Math.max(w, h) / 1000;
  const boxMean = (plane: Float64Array, size: number) => {
    const r = size >> 1;
    const out = new Float64Array(n);
    for (let y = 0; y < h; y++) {
      for (let x = 0; x < w; x++) {
        let sum = 0;
        let count = 0;
        for (let v = Math.max(0, y - r); v <= Math.min(h - 1, y + r); v++) {
          for (let u = Math.max(0, x - r); u <= Math.min(w - 1, x + r); u++, count++) sum += plane[v * w + u]!;
        }
        out[y * w + x] = sum / count;
      }
    }
    return out;
  };
  const a = Float64Array.from(alpha, (v) => v / 255);
  const image = [0, 1, 2].map((c) => Float64Array.from({ length: n }, (_, i) => rgb[i * 3 + c]! / 255));
  const pass = (f: Float64Array[], b: Float64Array[], size: number) => {
    const blurredA = boxMean(a, size);
    const fg: Float64Array[] = [];
    const bf: Float64Array[] = [];
    const bb: Float64Array[] = [];
    for (let c = 0; c < 3; c++) {
      const F = boxMean(Float64Array.from({ length: n }, (_, i) => f[c]![i]! * a[i]!), size).map((v, i) => v / (blurredA[i]! + 1e-5));
      const B = boxMean(Float64Array.from({ length: n }, (_, i) => b[c]![i]! * (1 - a[i]!)), size).map((v, i) => v / (1 - blurredA[i]! + 1e-5));
      fg.push(F.map((v, i) => Math.min(1, Math.max(0, v + a[i]! * (image[c]![i]! - a[i]! * v - (1 - a[i]!) * B[i]!)))));
      bf.push(F);
      bb.push(B);
    }
    return { fg, bf, bb };
  };
  const first = pass(image, image, Math.max(3, Math.round(90 * unit)));
  const second = pass(first.fg, first.bb, Math.max(3, Math.round(6 * unit)));
  const out = Buffer.from(rgb);
  for (let i = 0; i < n; i++) {
    const al = alpha[i]! / 255;
    if (alpha[i] === 0 || alpha[i] === 255) continue;
    for (let c = 0; c < 3; c++) {
      const fb = 255 * second.bf[c]![i]!;
      const bg = 255 * second.bb[c]![i]!;
      out[i * 3 + c] = Math.min(255, Math.max(0, Math.round(fb + al * (rgb[i * 3 + c]! - al * fb - (1 - al) * bg))));
    }
  }
  return out;
}

describe('foreground estimation against the paper, computed apart', () => {
  for (const c of [
    { width: 240, height: 160, cx: 0.5, cy: 0.55, radius: 45 },
    { width: 200, height: 150, cx: 0.1, cy: 0.9, radius: 60 },
  ]) {
    it(`gives the direct box-mean estimate at every soft pixel to within float rounding (${c.width}x${c.height}, object at ${c.cx}, ${c.cy})`, async () => {
      const { rgb, alpha } = blobScene(c.width, c.height, c.cx, c.cy, c.radius);
      const estimated = await estimateForeground(Buffer.from(rgb), alpha, c.width, c.height);
      const reference = referenceEstimate(rgb, alpha, c.width, c.height);
      let soft = 0;
      let exact = 0;
      let worst = 0;
      for (let i = 0; i < alpha.length; i++) {
        if (alpha[i] === 0 || alpha[i] === 255) continue;
        soft++;
        let same = true;
        for (let k = i * 3; k < i * 3 + 3; k++) {
          worst = Math.max(worst, Math.abs(estimated[k]! - reference[k]!));
          if (estimated[k] !== reference[k]) same = false;
        }
        if (same) exact++;
      }
      expect(soft).toBeGreaterThan(500);
      // The code rounds its planes to floats where the reference keeps doubles: a value on a
      // rounding boundary may land one step away, no more, and rarely.
      expect(worst).toBeLessThanOrEqual(1);
      expect(exact / soft).toBeGreaterThan(0.99);
      // Opaque and transparent pixels are the input's.
      expect(estimated.equals(reference)).toBe(exact === soft);
    });
  }
});

describe('the working view (sampleView)', () => {
  it('takes each output from the mean of the 2 x 2 source pixels around its centre', () => {
    // 4x4 -> 2x2: output (0, 0)'s centre is source (0.5, 0.5), between source pixels 0 and 1.
    const src = Buffer.from(Array.from({ length: 16 }, (_, i) => i * 10));
    expect([...sampleView(src, 4, 4, 1, 2, 2)]).toEqual([(0 + 10 + 40 + 50) / 4, (20 + 30 + 60 + 70) / 4, (80 + 90 + 120 + 130) / 4, (100 + 110 + 140 + 150) / 4]);
  });

  it('keeps each channel apart and stays inside the source at its edges (1 x 1 and stretched views)', () => {
    const rgb = Buffer.alloc(3 * 3 * 3);
    for (let i = 0; i < 9; i++) rgb.set([10, 100, 200], i * 3);
    rgb.set([30, 120, 220], 8 * 3); // bottom-right pixel
    // 3x3 -> 1x1: the block at the centre pixel and its right and lower neighbours.
    expect([...sampleView(rgb, 3, 3, 3, 1, 1)]).toEqual([15, 105, 205]);
    // Stretched 3x3 -> 6x6: the last output column and row read the last source pixel, clamped.
    const big = sampleView(rgb, 3, 3, 3, 6, 6);
    expect(big.length).toBe(6 * 6 * 3);
    expect([...big.subarray(35 * 3)]).toEqual([30, 120, 220]);
    expect([...big.subarray(0, 3)]).toEqual([10, 100, 200]);
  });
});

/** A deterministic generator of 32-bit states, for the property tests below. */
function generator(seed: number): () => number {
  let state = seed >>> 0;
  return () => (state = (Math.imul(state, 1664525) + 1013904223) >>> 0) / 2 ** 32;
}

describe('the blur fusion in WebAssembly SIMD (foreground-blur.wat) against the JavaScript loops', () => {
  // Planes as the estimate fills them (v / 255 as floats, exact 0 and 1 among them) and, for the
  // second pass, arbitrary floats in 0..1; sizes odd and even, narrower and shorter than the box,
  // one pixel; box sizes whose radius passes the plane's width and height.
  const sizes: Array<[number, number, number]> = [
    [300, 200, 27], [301, 199, 27], [200, 300, 3], [7, 5, 27], [31, 17, 9], [1, 1, 3], [2, 3, 3], [64, 1, 5], [1, 64, 5], [244, 245, 91],
  ];
  it.each(sizes)('%ix%i, box %i: every kept plane is the same floats, bit for bit, both passes', (w, h, size) => {
    expect(blursWithSimd()).toBe(true);
    const random = generator(w * 1000 + h * 10 + size);
    const n = w * h;
    const bytePlane = () => Float32Array.from({ length: n }, () => { const u = random(); return u < 0.2 ? 0 : u > 0.8 ? 1 : Math.floor(random() * 256) / 255; });
    const anyPlane = () => Float32Array.from({ length: n }, () => random());
    const planes = { image: [bytePlane(), bytePlane(), bytePlane()], f: [anyPlane(), anyPlane(), anyPlane()], b: [anyPlane(), anyPlane(), anyPlane()], a: bytePlane() };
    for (const keep of ['foreground', 'blurred'] as const) {
      const js = blurFusionPlanes(planes, w, h, size, keep, false);
      const simd = blurFusionPlanes(planes, w, h, size, keep, true);
      const bits = (list: Float32Array[]) => list.map((p) => Array.from(new Uint32Array(p.buffer, p.byteOffset, p.length)));
      expect(bits(simd.foreground)).toEqual(bits(js.foreground));
      expect(bits(simd.blurredForeground)).toEqual(bits(js.blurredForeground));
      expect(bits(simd.blurredBackground)).toEqual(bits(js.blurredBackground));
      expect(simd.foreground.length + simd.blurredForeground.length).toBe(3);
    }
  });

  it.each(sizes)('%ix%i, box %i: the sparse second pass makes the same floats at every point, bit for bit', (w, h, size) => {
    const random = generator(w * 7 + h * 13 + size);
    const n = w * h;
    const anyPlane = () => Float32Array.from({ length: n }, () => random());
    // Alpha as the estimate fills it: exact 0 and 1 among values v / 255.
    const a = Float32Array.from({ length: n }, () => { const u = random(); return u < 0.2 ? 0 : u > 0.8 ? 1 : Math.floor(random() * 256) / 255; });
    const planes = { f: [anyPlane(), anyPlane(), anyPlane()], b: [anyPlane(), anyPlane(), anyPlane()], a };
    // Every point (the box's edges and corners among them), some twice.
    const points = [...Array.from({ length: n }, (_, i) => i), 0, n - 1];
    const bits = (list: Float32Array[]) => list.map((p) => Array.from(new Uint32Array(p.buffer, p.byteOffset, p.length)));
    expect(bits(sparseSecondPlanes(planes, w, h, size, points, true))).toEqual(bits(sparseSecondPlanes(planes, w, h, size, points, false)));
  });

  it('gives the JavaScript estimate\'s bytes end to end: soft objects over noise, from a model-size view and not, band and whole', async () => {
    for (const [width, height, seed] of [[1224, 816, 1], [600, 399, 2], [333, 501, 3], [40, 25, 4]] as const) {
      const random = generator(seed);
      const rgb = Buffer.alloc(width * height * 3);
      for (let i = 0; i < rgb.length; i++) rgb[i] = Math.floor(random() * 256);
      // Soft discs scattered over the image (as a model's mask's fur and hair are), flat elsewhere.
      const alpha = Buffer.alloc(width * height);
      for (let k = 0; k < 12; k++) {
        const cx = random() * width;
        const cy = random() * height;
        const r = 3 + random() * Math.min(width, height) * 0.2;
        for (let y = 0; y < height; y++) {
          for (let x = 0; x < width; x++) {
            const d = Math.hypot(x - cx, y - cy) - r;
            const v = d < -2 ? 255 : d > 2 ? 0 : Math.round((255 * (2 - d)) / 4);
            alpha[y * width + x] = Math.max(alpha[y * width + x]!, v);
          }
        }
      }
      const view = { rgb: await sharp(rgb, { raw: { width, height, channels: 3 } }).resize(1024, 1024, { fit: 'fill' }).raw().toBuffer(), alpha: await sharp(alpha, { raw: { width, height, channels: 1 } }).resize(1024, 1024, { fit: 'fill' }).extractChannel(0).raw().toBuffer(), width: 1024, height: 1024 };
      for (const source of [view, undefined]) {
        for (const region of ['band', 'whole'] as const) {
          const js = await estimateForeground(Buffer.from(rgb), alpha, width, height, source, region, { simd: false });
          const before = kernelCalls['estimateForeground.simd'] ?? 0;
          const simd = await estimateForeground(Buffer.from(rgb), alpha, width, height, source, region);
          expect(kernelCalls['estimateForeground.simd']).toBe(before + 1);
          expect(simd.equals(js)).toBe(true);
          expect(simd.equals(rgb)).toBe(false);
        }
      }
    }
  });
});
