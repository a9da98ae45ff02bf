import sharp from 'sharp';
import { ApiError } from '../errors.js';
import { cutoutConfidence, type Look } from './confidence.js';
import { enlargesRegionExactly, regionTileWidth, resizeFillRgb } from './fill-resize.js';
import { maskConfidence, type MaskPart } from './full-size-mask.js';
import { countKernel } from './kernel-calls.js';
import type { BestPasses, Quality, Region } from './passes.js';
import { decodeForModel, openDecoder, segment, type DecodeGate, type ImageLimits, type MaskModel, type Probe, type Segmentation } from './pipeline.js';
import type { PixelPool } from './pixel-pool.js';
import { ISNET_PROFILE, type ModePlan, type PreprocessingProfile } from './profile.js';
import { modelInput, type ModelInput } from './model-input.js';
import { sharedCopy } from './shared-bytes.js';
import { releaseUpload } from '../upload-bytes.js';
import { maskToGrey } from './tensor.js';

export { QUALITIES, type BestPasses, type Quality, type Region } from './passes.js';
export { pasteBlended } from './full-size-mask.js';

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
  const whole = (passes.mirror ? 2 : 1) + (passes.scales?.length ?? 0);
  const crop = passes.cropMaxArea > 0 ? (passes.cropMirror ? 2 : 1) : 0;
  const tiles = Number.isFinite(passes.tileMinSide) ? 2 : 0;
  return whole + Math.max(crop, tiles);
}

/** What a cutout of each quality counts against a monthly quota, as a multiple of a `balanced` one. */
export const QUALITY_QUOTA_WEIGHT: Record<Quality, number> = {
  fast: 1,
  balanced: 1,
  // The most passes `best` runs on the built-in model, at its fixed size or any size.
  best: Math.max(maxPasses(), maxPasses(ISNET_PROFILE.modes?.best?.passes)),
};

/**
 * What each quality costs, in words, from the built-in model's plan (the OpenAPI document and
 * /docs show it): passes, the model's input size, quota weight.
 */
export function describeQualities(profile: PreprocessingProfile = ISNET_PROFILE): string {
  const size = (q: Quality) => profile.modes?.[q]?.size ?? profile.width;
  const best = profile.modes?.best?.passes ?? BEST_PASSES;
  return (
    `\`balanced\` (the default): one model pass, the image at ${size('balanced')} px. ` +
    `\`fast\`: one pass at ${size('fast')} px (about ${Math.round((size('fast') / size('balanced')) ** 2 * 100)} % of balanced's model work), ` +
    'no foreground colour estimation, faster PNG; thin structures and fine edges suffer. ' +
    `\`best\`: up to ${maxPasses(best)} passes merged (the whole image at ${[size('best'), ...(best.scales ?? [])].join(' and ')} px, the object's crop and its mirror), ` +
    `about ${maxPasses(best)}x the model work. Quota weight per cutout: fast ${QUALITY_QUOTA_WEIGHT.fast}, balanced ${QUALITY_QUOTA_WEIGHT.balanced}, best ${QUALITY_QUOTA_WEIGHT.best}. ` +
    'Sizes apply to models that take any size (the built-in one); a fixed-size model runs every mode at its own size.'
  );
}

/** Rendering settings per quality: `fast` skips foreground estimation and uses a faster PNG level. */
export function renderSettingsFor<T extends { pngCompressionLevel: number; foregroundEstimation: boolean }>(quality: Quality, base: T): T {
  if (quality !== 'fast') return base;
  return { ...base, pngCompressionLevel: Math.min(base.pngCompressionLevel, 1), foregroundEstimation: false };
}

/**
 * What a quality runs with this profile: the profile's own mode table when the served model takes
 * any size (`freeSize`, from its metadata), else undefined (the profile's fixed size, and `best`
 * with BEST_PASSES).
 */
export function planFor(profile: PreprocessingProfile, quality: Quality, freeSize: boolean): ModePlan | undefined {
  return freeSize ? profile.modes?.[quality] : undefined;
}

/**
 * The model each kind of pass runs on (the mode table's `model` and `cropModel`, resolved to
 * served models by the caller): `whole` for the whole image (the first pass, its mirror, other
 * scales), `crop` for the object's crop, its mirror and tiles.
 */
export interface PassModels {
  whole: MaskModel;
  crop: MaskModel;
}

/**
 * segment() at a quality: `fast` and `balanced` are exactly one pass; `best` runs the extra
 * passes of its plan, each a separate call of `model` (so several inference servers share them),
 * and replaces the segmentation's mask plan with their merge. Timings add up the passes. With a
 * `plan` (a model that takes any size, see planFor()) the whole image runs at the plan's size;
 * without, at the profile's. `best` merges its masks in `pool`'s workers and mirrors with libvips,
 * so none of its per-pixel work runs on the event loop.
 */
export async function segmentAtQuality(
  quality: Quality,
  bytes: Buffer,
  probe: Probe,
  profile: PreprocessingProfile,
  model: MaskModel | PassModels,
  limits: ImageLimits,
  signal: AbortSignal,
  pool: PixelPool,
  decodeAlongside = true,
  plan?: ModePlan,
  /** Taken around each decode of the upload (pipeline.ts's DecodeGate). */
  gate?: DecodeGate,
  /** The caller alone holds `bytes` and reads them no more (segment()'s `lendUpload`). */
  ownUpload = false,
): Promise<Segmentation> {
  const models: PassModels = typeof model === 'function' ? { whole: model, crop: model } : model;
  const sized = plan ? { ...profile, width: plan.size, height: plan.size } : profile;
  // One pass: its model-size image goes to one task after (the working view or the render),
  // which takes it moved (output.ts); `best` hands it to its mirror pass too, so it stays shared.
  // So does the upload, lent to the model input's decode and moved into the render.
  if (quality !== 'best') return segment(bytes, probe, sized, models.whole, limits, signal, decodeAlongside, pool, gate, 'movable', ownUpload);
  const passes = plan?.passes ?? BEST_PASSES;
  // `best` reads the upload in several tasks (its first pass, the crops' decodes, the render):
  // in shared memory it reaches each without a copy here; the caller's own copy is freed now.
  const upload = bytes;
  bytes = sharedCopy(bytes);
  if (ownUpload && bytes !== upload) releaseUpload(upload);

  // The input's own alpha is folded into the mask when the output is rendered, after the merge.
  const seg = await segment(bytes, probe, sized, models.whole, limits, signal, false, pool, gate);
  const started = performance.now();
  let inferenceMs = 0;
  let modelMs = 0;
  const { width, height } = probe;
  /**
   * The model inputs of one pass and/or its mirror, made in `pool`'s worker: the region of the
   * upload decoded there (under the decode budget) or `rgb` as it is, mirrored by libvips, and
   * each tensor written straight into its call's message, which is moved here and sent as it is.
   */
  const inputsFor = async (source: Region | Buffer, w: number, h: number, pass: keyof PassModels, which: { plain: boolean; mirror: boolean }): Promise<PassInputs> => {
    const size = { width: w, height: h };
    const job: PassInputJob = {
      source: Buffer.isBuffer(source) ? { rgb: source } : { bytes, probe, limits, region: source },
      profile: { ...profile, ...size },
      prefix: models[pass].prefix?.(size),
      ...which,
    };
    const release = gate && !Buffer.isBuffer(source) ? await gate(source.width * source.height, signal) : undefined;
    try {
      return await pool.passInputs(job);
    } finally {
      release?.();
    }
  };
  const run = async (input: ModelInput, w: number, h: number, pass: keyof PassModels = 'whole'): Promise<Buffer> => {
    const model = models[pass];
    const t0 = performance.now();
    const size = { width: w, height: h };
    const { mask, serverRunMs } = await model(input, signal, size);
    const elapsed = performance.now() - t0;
    modelMs += elapsed;
    inferenceMs += serverRunMs ?? elapsed;
    if (mask.length !== w * h) throw new Error(`model returned ${mask.length} mask values`);
    // Shared: the merges, the crop and the confidence count take it in a worker without a copy here.
    return sharedCopy(maskToGrey(mask, profile.minMaxNormalize, profile.outputActivation === 'sigmoid'));
  };
  const { width: mw, height: mh } = sized;
  /** A pass's mask (`first`, or the model's answer to `inputs.plain`), merged with its mirror's when made. */
  const passAndMirror = async (inputs: PassInputs, w: number, h: number, first: Promise<Buffer> | undefined, merge: BestPasses['mirrorMerge'], pass: keyof PassModels) => {
    const plain = first ?? run(inputs.plain!, w, h, pass);
    if (!inputs.mirrored) return plain;
    // The mirror's call starts a turn of the event loop after the plain one's: grpc-js copies each
    // 3 MiB message once more to frame it, and the two copies in one turn made one long block.
    const mirrorCall = new Promise<void>((resolve) => setImmediate(resolve)).then(() => run(inputs.mirrored!, w, h, pass));
    const [a, b] = await Promise.all([plain, mirrorCall]);
    // The mirror's mask is mirrored back in the worker, then merged.
    return pool.mergeMasks([a, b], merge, { width: w, height: h });
  };

  const firstPass = passes.mirror
    ? inputsFor(seg.model.rgb, mw, mh, 'whole', { plain: false, mirror: true }).then((inputs) => passAndMirror(inputs, mw, mh, Promise.resolve(seg.mask.grey), passes.mirrorMerge, 'whole'))
    : Promise.resolve(seg.mask.grey);
  // The whole image at other sizes, each brought to the first pass's size to be merged.
  const scaled = (passes.scales ?? []).map(async (size) => {
    const inputs = await inputsFor({ left: 0, top: 0, width, height }, size, size, 'whole', { plain: true, mirror: false });
    return pool.upscaleMask(await run(inputs.plain!, size, size), size, size, mw, mh);
  });
  // Regions depend only on the first pass, so they run alongside the other passes.
  const crop = passes.cropMaxArea > 0 ? await pool.objectCrop(seg.mask.grey, mw, mh, width, height, passes.cropMargin, passes.cropMaxArea) : null;
  const regions: Region[] = crop ? [crop] : Math.max(width, height) >= passes.tileMinSide ? halves(width, height) : [];
  const cw = passes.cropSize ?? mw;
  const ch = passes.cropSize ?? mh;
  const regionMasks = regions.map(async (region) => {
    const inputs = await inputsFor(region, cw, ch, 'crop', { plain: true, mirror: crop ? passes.cropMirror : false });
    return passAndMirror(inputs, cw, ch, undefined, passes.mirrorMerge, 'crop');
  });
  const [first, ...rest] = await Promise.all([firstPass, ...scaled, ...regionMasks]);
  const others = rest.slice(0, scaled.length);
  const parts = rest.slice(scaled.length);
  const whole = others.length > 0 ? await pool.mergeMasks([first!, ...others], passes.scaleMerge ?? 'mean') : first!;

  // The full-size merge waits, like a single pass's upscale, until the output is rendered.
  const maskParts: MaskPart[] = regions.map((region, i) => ({
    mask: parts[i]!,
    width: cw,
    height: ch,
    region,
    ramp: rampWidth(region, passes.cropMargin),
    how: passes.cropMerge,
    weight: passes.cropWeight,
  }));
  seg.mask = { grey: whole, width: mw, height: mh, parts: maskParts };
  seg.model = { ...seg.model, alpha: whole };
  // Confidence on the model grid: the merged whole with the region passes laid over it, and
  // every look compared where they overlap.
  const grid = (region: Region) => ({ left: (region.left * mw) / width, top: (region.top * mh) / height, width: (region.width * mw) / width, height: (region.height * mh) / height });
  const looks: Look[] = [first!, ...others].map((mask) => ({ mask, width: mw, height: mh, box: { left: 0, top: 0, width: mw, height: mh } }));
  regions.forEach((region, i) => looks.push({ mask: parts[i]!, width: cw, height: ch, box: grid(region) }));
  seg.confidence = await pool.looksConfidence(whole, mw, mh, looks, 1 + others.length);
  const totalMs = performance.now() - started;
  seg.timings.inference = (seg.timings.inference ?? 0) + inferenceMs;
  seg.timings.transfer = (seg.timings.transfer ?? 0) + modelMs - inferenceMs;
  seg.timings.postprocess = (seg.timings.postprocess ?? 0) + Math.max(0, totalMs - modelMs);
  return seg;
}

/**
 * The confidence of a merged mask (w x h) with the region looks from `laidFrom` on laid over it
 * (nearest sample), every look compared where they overlap: see cutoutConfidence.
 */
export function looksConfidence(whole: Buffer, w: number, h: number, looks: Look[], laidFrom: number): number {
  countKernel('looksConfidence');
  let final = whole;
  if (laidFrom < looks.length) {
    final = Buffer.from(whole);
    for (const look of looks.slice(laidFrom)) layNearest(final, w, h, look);
  }
  return cutoutConfidence(final, w, h, looks);
}

/** Where a pass's pixels come from: a region of the upload (decoded and resized), or pixels at the pass's size already. */
export type PassSource = { bytes: Buffer; probe: Probe; limits: ImageLimits; region: Region } | { rgb: Buffer };

/** What preparePassInputs works from: the source, the profile at the call's size, the call's prefix, which inputs. */
export interface PassInputJob {
  source: PassSource;
  profile: PreprocessingProfile;
  prefix?: Uint8Array | undefined;
  plain: boolean;
  mirror: boolean;
}

/** The inputs asked for: of the pixels as they are, and of their horizontal mirror; `rgb`, the pixels. */
export interface PassInputs {
  rgb: Buffer;
  plain?: ModelInput;
  mirrored?: ModelInput;
}

/**
 * The model inputs of one of `best`'s passes: the pixels (a region decoded, or as given), and
 * their mirror by libvips, each written into its call's message (modelInput). Run in the pixel
 * pool's worker (pixel-worker.ts's passInputs): none of it on the host's event loop.
 */
export async function preparePassInputs(job: PassInputJob): Promise<PassInputs> {
  countKernel('preparePassInputs');
  const { profile } = job;
  const rgb = 'rgb' in job.source ? job.source.rgb : await decodeRegionNow(job.source.bytes, job.source.probe, job.source.limits, job.source.region, profile);
  return {
    rgb,
    plain: job.plain ? modelInput(rgb, profile, job.prefix) : undefined,
    mirrored: job.mirror ? modelInput(await mirrored(rgb, profile.width, profile.height, 3), profile, job.prefix) : undefined,
  };
}

/** Horizontal mirror of interleaved 8-bit pixels, by libvips (flop): the same bytes as a loop, off the event loop. */
export async function mirrored(pixels: Buffer, width: number, height: number, channels: 1 | 3): Promise<Buffer> {
  const flopped = sharp(pixels, { raw: { width, height, channels } }).flop();
  // One channel in comes back as three unless asked for the one.
  const out = await (channels === 1 ? flopped.extractChannel(0) : flopped).raw().toBuffer();
  if (out.length !== pixels.length) throw new Error(`mirror: ${out.length} bytes from ${pixels.length}`);
  return out;
}

/** Lays a look over a mask on its grid (nearest sample): a cheap picture of the merged mask. */
function layNearest(mask: Buffer, w: number, h: number, look: Look): void {
  const { left, top, width: bw, height: bh } = look.box;
  for (let y = Math.max(0, Math.floor(top)); y < Math.min(h, Math.ceil(top + bh)); y++) {
    const ly = Math.min(look.height - 1, Math.max(0, Math.floor(((y + 0.5 - top) * look.height) / bh)));
    for (let x = Math.max(0, Math.floor(left)); x < Math.min(w, Math.ceil(left + bw)); x++) {
      const lx = Math.min(look.width - 1, Math.max(0, Math.floor(((x + 0.5 - left) * look.width) / bw)));
      mask[y * w + x] = look.mask[ly * look.width + lx]!;
    }
  }
}

/** Merges masks of one size: the mean, or each pixel weighted by each mask's confidence. */
export function mergeMasks(masks: Buffer[], how: BestPasses['mirrorMerge']): Buffer {
  countKernel('mergeMasks');
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
      const w = how === 'mean' ? 1 : maskConfidence(m[i]!);
      sum += w * m[i]!;
      weights += w;
    }
    out[i] = Math.round(sum / weights);
  }
  return out;
}

/** Horizontal mirror of a one-channel image. */
export function flipGrey(grey: Buffer, width: number, height: number): Buffer {
  countKernel('flipGrey');
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

/**
 * A region of the upright image, resized to w x h, as the first pass decodes the whole. A growing
 * axis is enlarged by the split (fill-resize.ts) wherever that gives sharp's one-call bytes: the
 * whole image as decodeForModel makes it (an EXIF-turned one resized in its stored frame), a
 * region in the upright frame whatever the orientation (enlargesRegionExactly; in libvips's
 * tiles after a quarter turn, regionTileWidth).
 */
async function decodeRegionNow(bytes: Buffer, probe: Probe, limits: ImageLimits, region: Region, profile: PreprocessingProfile): Promise<Buffer> {
  const whole = region.left === 0 && region.top === 0 && region.width === probe.width && region.height === probe.height;
  if (whole) return decodeForModel(bytes, probe, limits, profile);
  try {
    const base = probe.hasAlpha ? openDecoder(bytes, limits).flatten({ background: '#ffffff' }) : openDecoder(bytes, limits).removeAlpha();
    return await resizeFillRgb(base.extract(region), region.width, region.height, profile.width, profile.height, enlargesRegionExactly(probe), undefined, regionTileWidth(probe));
  } catch (error) {
    throw new ApiError('corrupt_image', { cause: error });
  }
}

/**
 * Inference slots a cutout of this quality holds: `best` runs its passes after the first two at
 * a time (the mirror and the crop), so it holds two.
 */
export function slotsFor(quality: Quality): number {
  return quality === 'best' ? 2 : 1;
}
