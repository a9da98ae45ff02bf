import { ApiError } from '../errors.js';
import { decodeFullSize, openDecoder, segment, type ImageLimits, type MaskModel, type Probe, type Segmentation } from './pipeline.js';
import type { PreprocessingProfile } from './profile.js';
import { imageToTensor, maskToGrey, upscaleMask } from './tensor.js';

/**
 * The `quality` option: how much work one cutout gets.
 * - `fast`: one model pass, no foreground colour estimation, a faster PNG level.
 * - `balanced`: one model pass (the default; what every cutout was before the option).
 * - `best`: several model passes merged into one mask (see BEST_PASSES).
 */
export const QUALITIES = ['fast', 'balanced', 'best'] as const;
export type Quality = (typeof QUALITIES)[number];

/** A region of the upright full-size image, in pixels. */
export interface Region {
  left: number;
  top: number;
  width: number;
  height: number;
}

/** Which extra passes `best` runs and how it merges them (the candidates measured by bench/best-candidates.ts). */
export interface BestPasses {
  /** Also run the mirror image and merge its (mirrored back) mask with the first pass. */
  mirror: boolean;
  /**
   * Run a second pass on the object's crop when the crop covers at most this fraction of the
   * image's area (so the model sees the object larger); 0 for never.
   */
  cropMaxArea: number;
  /** Margin added around the object's box for the crop, as a fraction of the box's longer side. */
  cropMargin: number;
  /** Also run the crop's mirror image. */
  cropMirror: boolean;
  /**
   * Inside the crop: `replace` takes the crop's mask; `mean` averages it with the whole-image
   * mask; `confidence` weighs each by how sure it is (|2p - 1|). Near the crop's inner edges the
   * crop's weight ramps down to 0 over the margin, so no seam shows.
   */
  cropMerge: 'replace' | 'mean' | 'confidence' | 'max';
  /**
   * For `mean` and `confidence`: the crop's weight against the whole-image mask (itself the merge
   * of the image and its mirror when `mirror`); 0.5 with a mirror gives each of the three passes a third.
   */
  cropWeight: number;
  /** Merging the whole-image passes (image and mirror): plain mean or confidence-weighted. */
  mirrorMerge: 'mean' | 'confidence' | 'max';
  /**
   * Tiles: when the image's longer side is at least this many pixels, also run the model on two
   * overlapping halves along it, merged like a crop. Infinity for never.
   */
  tileMinSide: number;
}

/** What `best` does: chosen by measurement on the evaluation set (README, "Quality modes"). */
export const BEST_PASSES: BestPasses = {
  // The whole image is seen once, to find the object; then the object's crop (10 % margin) and
  // its mirror, merged by the larger value, replace the mask inside the crop. Whole-image mirror
  // averaging and tiles were measured and left out (see the README's table).
  mirror: false,
  cropMaxArea: 1,
  cropMargin: 0.1,
  cropMirror: true,
  cropMerge: 'replace',
  cropWeight: 1,
  mirrorMerge: 'max',
  tileMinSide: Infinity,
};

/** Most model passes one `best` cutout runs with the given settings (for quota weighting and slots). */
export function maxPasses(passes: BestPasses = BEST_PASSES): number {
  const whole = passes.mirror ? 2 : 1;
  const crop = passes.cropMaxArea > 0 ? (passes.cropMirror ? 2 : 1) : 0;
  const tiles = Number.isFinite(passes.tileMinSide) ? 2 : 0;
  return whole + Math.max(crop, tiles);
}

/** What a cutout of each quality counts against a monthly quota, as a multiple of a `balanced` one. */
export const QUALITY_QUOTA_WEIGHT: Record<Quality, number> = { fast: 1, balanced: 1, best: maxPasses() };

/** Rendering settings per quality: `fast` skips foreground estimation and uses a faster PNG level. */
export function renderSettingsFor<T extends { pngCompressionLevel: number; foregroundEstimation: boolean }>(quality: Quality, base: T): T {
  if (quality !== 'fast') return base;
  return { ...base, pngCompressionLevel: Math.min(base.pngCompressionLevel, 1), foregroundEstimation: false };
}

/**
 * segment() at a quality: `fast` and `balanced` are exactly one pass; `best` runs the extra
 * passes of `passes`, each a separate call of `model` (so several inference servers share them),
 * and replaces the segmentation's mask with their merge. Timings add up the passes.
 */
export async function segmentAtQuality(
  quality: Quality,
  bytes: Buffer,
  probe: Probe,
  profile: PreprocessingProfile,
  model: MaskModel,
  limits: ImageLimits,
  signal: AbortSignal,
  decodeAlongside = true,
  passes: BestPasses = BEST_PASSES,
): Promise<Segmentation> {
  if (quality !== 'best') return segment(bytes, probe, profile, model, limits, signal, decodeAlongside);

  // The input's own alpha is folded into the mask when the full size is decoded: decode after
  // the merge, so the fold applies to the merged mask.
  const seg = await segment(bytes, probe, profile, model, limits, signal, false);
  const started = performance.now();
  let inferenceMs = 0;
  let modelMs = 0;
  const run = async (rgb: Buffer): Promise<Buffer> => {
    const t0 = performance.now();
    const { mask, serverRunMs } = await model(imageToTensor(rgb, profile), signal);
    const elapsed = performance.now() - t0;
    modelMs += elapsed;
    inferenceMs += serverRunMs ?? elapsed;
    if (mask.length !== profile.width * profile.height) throw new Error(`model returned ${mask.length} mask values`);
    return maskToGrey(mask, profile.minMaxNormalize, profile.outputActivation === 'sigmoid');
  };
  const { width: mw, height: mh } = profile;
  /** A pass on `rgb` (at the model's size), and on its mirror when asked; their merged mask. */
  const passAndMirror = async (rgb: Buffer, first: Promise<Buffer>, mirror: boolean, merge: BestPasses['mirrorMerge']) => {
    if (!mirror) return first;
    const [a, b] = await Promise.all([first, run(flipRgb(rgb, mw, mh)).then((m) => flipGrey(m, mw, mh))]);
    return mergeMasks([a, b], merge);
  };

  const { width, height } = probe;
  const wholePromise = passAndMirror(seg.model.rgb, Promise.resolve(seg.model.alpha), passes.mirror, passes.mirrorMerge);
  // Regions depend only on the first pass, so they run alongside the mirror pass.
  const crop = passes.cropMaxArea > 0 ? objectCrop(seg.model.alpha, mw, mh, width, height, passes.cropMargin, passes.cropMaxArea) : null;
  const regions: Region[] = crop ? [crop] : Math.max(width, height) >= passes.tileMinSide ? halves(width, height) : [];
  const regionMasks = regions.map(async (region) => {
    const rgb = await decodeRegion(bytes, probe, profile, limits, region);
    return passAndMirror(rgb, run(rgb), crop ? passes.cropMirror : false, passes.mirrorMerge);
  });
  const [whole, ...parts] = await Promise.all([wholePromise, ...regionMasks]);

  // The full-size merge waits, like a single pass's upscale, until the full size is wanted.
  seg.buildAlpha = () => {
    let alpha = upscaleMask(whole, mw, mh, width, height);
    regions.forEach((region, i) => {
      const part = upscaleMask(parts[i]!, mw, mh, region.width, region.height);
      alpha = pasteBlended(alpha, width, height, part, region, rampWidth(region, passes.cropMargin), passes.cropMerge, passes.cropWeight);
    });
    return alpha;
  };
  seg.model = { ...seg.model, alpha: whole };
  const totalMs = performance.now() - started;
  seg.timings.inference = (seg.timings.inference ?? 0) + inferenceMs;
  seg.timings.transfer = (seg.timings.transfer ?? 0) + modelMs - inferenceMs;
  seg.timings.postprocess = (seg.timings.postprocess ?? 0) + Math.max(0, totalMs - modelMs);
  if (decodeAlongside) await decodeFullSize(seg, limits);
  return seg;
}

/** How sure a mask value is: 0 at 0.5, 1 at 0 or 1 (with a floor, so two unsure values still average). */
function confidence(v: number): number {
  return Math.abs(2 * v - 255) / 255 + 0.05;
}

/** Merges masks of one size: the mean, or each pixel weighted by each mask's confidence. */
export function mergeMasks(masks: Buffer[], how: BestPasses['mirrorMerge']): Buffer {
  const out = Buffer.allocUnsafe(masks[0]!.length);
  for (let i = 0; i < out.length; i++) {
    if (how === 'max') {
      let m = 0;
      for (const mask of masks) if (mask[i]! > m) m = mask[i]!;
      out[i] = m;
      continue;
    }
    let sum = 0;
    let weights = 0;
    for (const m of masks) {
      const w = how === 'mean' ? 1 : confidence(m[i]!);
      sum += w * m[i]!;
      weights += w;
    }
    out[i] = Math.round(sum / weights);
  }
  return out;
}

/** Horizontal mirror of interleaved RGB. */
export function flipRgb(rgb: Buffer, width: number, height: number): Buffer {
  const out = Buffer.allocUnsafe(rgb.length);
  for (let y = 0; y < height; y++) {
    const row = y * width * 3;
    for (let x = 0; x < width; x++) rgb.copy(out, row + (width - 1 - x) * 3, row + x * 3, row + x * 3 + 3);
  }
  return out;
}

/** Horizontal mirror of a one-channel image. */
export function flipGrey(grey: Buffer, width: number, height: number): Buffer {
  const out = Buffer.allocUnsafe(grey.length);
  for (let y = 0; y < height; y++) {
    const row = y * width;
    for (let x = 0; x < width; x++) out[row + width - 1 - x] = grey[row + x]!;
  }
  return out;
}

/**
 * The object's box (mask >= 128 at the model's size) in full-size pixels, grown by `margin` of
 * its longer side and kept inside the image; null when nothing was found or the box covers more
 * than `maxArea` of the image (a crop would then add little resolution).
 */
export function objectCrop(mask: Buffer, mw: number, mh: number, width: number, height: number, margin: number, maxArea: number): Region | null {
  let x0 = mw;
  let y0 = mh;
  let x1 = -1;
  let y1 = -1;
  for (let y = 0; y < mh; y++) {
    for (let x = 0; x < mw; x++) {
      if (mask[y * mw + x]! >= 128) {
        if (x < x0) x0 = x;
        if (x > x1) x1 = x;
        if (y < y0) y0 = y;
        if (y > y1) y1 = y;
      }
    }
  }
  if (x1 < 0) return null;
  const sx = width / mw;
  const sy = height / mh;
  const boxW = (x1 - x0 + 1) * sx;
  const boxH = (y1 - y0 + 1) * sy;
  const grow = margin * Math.max(boxW, boxH);
  const left = Math.max(0, Math.floor(x0 * sx - grow));
  const top = Math.max(0, Math.floor(y0 * sy - grow));
  const right = Math.min(width, Math.ceil((x1 + 1) * sx + grow));
  const bottom = Math.min(height, Math.ceil((y1 + 1) * sy + grow));
  const region = { left, top, width: right - left, height: bottom - top };
  if (region.width < 8 || region.height < 8) return null;
  if (region.width * region.height > maxArea * width * height) return null;
  return region;
}

/** Two overlapping halves (each 5/8 of the longer side) of a large image. */
export function halves(width: number, height: number): Region[] {
  if (width >= height) {
    const w = Math.ceil((width * 5) / 8);
    return [
      { left: 0, top: 0, width: w, height },
      { left: width - w, top: 0, width: w, height },
    ];
  }
  const h = Math.ceil((height * 5) / 8);
  return [
    { left: 0, top: 0, width, height: h },
    { left: 0, top: height - h, width, height: h },
  ];
}

/** The width of the blend at a region's inner edges: its margin, at least 4 pixels. */
function rampWidth(region: Region, margin: number): number {
  return Math.max(4, Math.round((margin / (1 + 2 * margin)) * Math.max(region.width, region.height)));
}

/** A region of the upright image, resized to the model's size, as the first pass decodes the whole. */
async function decodeRegion(bytes: Buffer, probe: Probe, profile: PreprocessingProfile, limits: ImageLimits, region: Region): Promise<Buffer> {
  try {
    const base = probe.hasAlpha ? openDecoder(bytes, limits).flatten({ background: '#ffffff' }) : openDecoder(bytes, limits).removeAlpha();
    return await base.extract(region).resize(profile.width, profile.height, { fit: 'fill' }).raw({ depth: 'uchar' }).toBuffer();
  } catch (error) {
    throw new ApiError('corrupt_image', { cause: error });
  }
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
): Buffer {
  const out = Buffer.from(alpha);
  const { left, top } = region;
  const edge = (d: number, atBorder: boolean) => (atBorder ? 1 : Math.min(1, (d + 0.5) / ramp));
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
        const cb = confidence(b);
        const cr = w * confidence(r);
        v = (cb * b + cr * r) / (cb + cr);
      }
      out[row + x] = Math.round(v);
    }
  }
  return out;
}

/**
 * Inference slots a cutout of this quality holds: `best` runs its passes after the first two at
 * a time (the mirror and the crop), so it holds two.
 */
export function slotsFor(quality: Quality): number {
  return quality === 'best' ? 2 : 1;
}
