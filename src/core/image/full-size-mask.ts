import { countKernel } from './kernel-calls.js';
import { pasteReplaceSimd, splitAlphaSimd } from './render-compose.js';
import type { BestPasses, Region } from './passes.js';
import { upscaleMask } from './tensor.js';

/**
 * The full-size mask as data: the model's mask (the merge of `best`'s whole-image passes) and
 * the region passes to lay over it. A segmentation keeps this (model-size buffers only) instead of
 * a full-size mask; the pixel pool's workers make the full size from it (buildFullSizeMask), so
 * no full-size loop runs on the host's event loop.
 */
export interface MaskPlan {
  /** 8-bit mask at the model's grid, width x height. */
  grey: Buffer;
  width: number;
  height: number;
  /** `best`'s crop or tile passes, merged in order. */
  parts: MaskPart[];
}

/** A region pass: its mask (width x height) scaled to the region and blended in (pasteBlended). */
export interface MaskPart {
  mask: Buffer;
  width: number;
  height: number;
  region: Region;
  ramp: number;
  how: BestPasses['cropMerge'];
  weight: number;
}

/**
 * The full-size (width x height) mask a plan describes: bilinear upscale (into `into` when
 * given: width x height bytes, every one written), then each part pasted in (into new buffers).
 */
export function buildFullSizeMask(plan: MaskPlan, width: number, height: number, into?: Buffer): Buffer {
  let alpha = upscaleMask(plan.grey, plan.width, plan.height, width, height, into);
  for (const part of plan.parts) {
    const scaled = upscaleMask(part.mask, part.width, part.height, part.region.width, part.region.height);
    alpha = pasteBlended(alpha, width, height, scaled, part.region, part.ramp, part.how, part.weight);
  }
  return alpha;
}

/**
 * RGBA input: returns its RGB, and folds its own alpha into the mask (in place), so what was
 * transparent in the input stays transparent in the cutout.
 */
export function splitAlpha(rgba: Buffer, mask: Buffer, options: { simd?: boolean } = {}): Buffer {
  countKernel('splitAlpha');
  const pixels = mask.length;
  const rgb = Buffer.allocUnsafe(pixels * 3);
  // The same bytes in WebAssembly SIMD (render-compose.ts: integers, exact); `simd: false` keeps
  // to the JavaScript below (the reference).
  if (options.simd !== false && splitAlphaSimd(rgba, mask, rgb)) return rgb;
  for (let i = 0, j = 0, k = 0; i < pixels; i++, j += 3, k += 4) {
    rgb[j] = rgba[k]!;
    rgb[j + 1] = rgba[k + 1]!;
    rgb[j + 2] = rgba[k + 2]!;
    mask[i] = Math.round((mask[i]! * rgba[k + 3]!) / 255);
  }
  return rgb;
}

/** How sure a mask value is: 0 at 0.5, 1 at 0 or 1 (with a floor, so two unsure values still average). */
export function maskConfidence(v: number): number {
  return Math.abs(2 * v - 255) / 255 + 0.05;
}

/**
 * Merges a region's mask into the full-size mask. The region's weight is 1 inside and ramps to
 * 0 over `ramp` pixels towards each edge that is not the image's own border.
 */
export function pasteBlended(
  alpha: Buffer,
  width: number,
  height: number,
  part: Buffer,
  region: Region,
  ramp: number,
  how: BestPasses['cropMerge'],
  weight = 1,
  options: { simd?: boolean } = {},
): Buffer {
  countKernel('pasteBlended');
  const out = Buffer.from(alpha);
  const { left, top } = region;
  const edge = (d: number, atBorder: boolean) => (atBorder ? 1 : Math.min(1, (d + 0.5) / ramp));
  // `replace` (best's crop merge) in WebAssembly SIMD (render-compose.ts), the same bytes: each
  // pixel's weight is min(its row's, its column's), the JavaScript's three-way minimum regrouped
  // (exact); `simd: false` keeps to the JavaScript below (the reference).
  if (how === 'replace' && options.simd !== false) {
    const rowW = Float64Array.from({ length: region.height }, (_, y) => Math.min(edge(y, top === 0), edge(region.height - 1 - y, top + region.height === height)));
    const colW = Float64Array.from({ length: region.width }, (_, x) => Math.min(edge(x, left === 0), edge(region.width - 1 - x, left + region.width === width)));
    if (pasteReplaceSimd(alpha, width, out, part, region, rowW, colW)) return out;
  }
  for (let y = 0; y < region.height; y++) {
    const wy = Math.min(edge(y, top === 0), edge(region.height - 1 - y, top + region.height === height));
    const row = (top + y) * width + left;
    for (let x = 0; x < region.width; x++) {
      const ramp = Math.min(wy, edge(x, left === 0), edge(region.width - 1 - x, left + region.width === width));
      const w = how === 'replace' ? ramp : ramp * weight;
      const b = alpha[row + x]!;
      const r = part[y * region.width + x]!;
      let v: number;
      if (how === 'replace') v = w * r + (1 - w) * b;
      else if (how === 'max') v = Math.max(b, w * r + (1 - w) * b);
      else if (how === 'mean') v = (b + w * r) / (1 + w);
      else {
        const cb = maskConfidence(b);
        const cr = w * maskConfidence(r);
        v = (cb * b + cr * r) / (cb + cr);
      }
      out[row + x] = Math.round(v);
    }
  }
  return out;
}

