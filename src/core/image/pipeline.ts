import sharp, { type Metadata } from 'sharp';
import { ApiError } from '../errors.js';
import { cutoutConfidence } from './confidence.js';
import type { MaskPlan } from './full-size-mask.js';
import type { PixelPool } from './pixel-pool.js';
import type { PreprocessingProfile } from './profile.js';
import { prepareModelInput, type ModelInput } from './model-input.js';
import { sharedCopy } from './shared-bytes.js';
import { maskToGrey, type MaskTensor } from './tensor.js';

export { decodeForModel, decodeRaw, openDecoder } from './decode.js';

export interface ImageLimits {
  /** Largest image accepted, in pixels (width x height), checked from the header before decoding. */
  maxInputPixels: number;
}

/**
 * Runs the model on its input tensor (as the profile says) and resolves with its mask. `size` is
 * the tensor's width and height: the profile's for a fixed-size model; for a model whose height
 * and width are free, whatever the quality mode asked for (the mask comes back at that size).
 * `prefix`, when the model has it: the bytes its call at `size` sends before the tensor, so the
 * tensor can be written straight into the message (model-input.ts) instead of copied there.
 */
export type MaskModel = ((
  input: ModelInput,
  signal: AbortSignal,
  size?: { width: number; height: number },
) => Promise<{ mask: MaskTensor; serverRunMs?: number | undefined }>) & { prefix?: (size: { width: number; height: number }) => Uint8Array };

/**
 * Waits until `pixels` (of the source image) may be decoded now, in arrival order; resolves with
 * the release, or rejects with the signal's reason. The handler's is its decode budget
 * (`limits.maxDecodePixels`): a decode for the model holds libvips buffers of its own, about
 * 23 MB for a 12 MP JPEG however small the model's input, so sixteen large uploads arriving
 * together are decoded a few at a time rather than all at once.
 */
export type DecodeGate = (pixels: number, signal: AbortSignal) => Promise<() => void>;

export type Stage = 'decode' | 'preprocess' | 'transfer' | 'inference' | 'postprocess' | 'encode';

/**
 * The model's answer for an image of the upright full size. It holds model-size buffers only: the
 * full-size mask, colour and their composition are made by the pixel pool's workers when the
 * output is rendered (output.ts), off the host's event loop.
 */
export interface Segmentation {
  /**
   * The upright full-size 8-bit sRGB decode (RGBA when the image has alpha) when segment() made
   * it: a small JPEG decoded once for both sizes (decodeOnce), or another image of about the
   * model's size decoded while the model ran; else empty, and the render decodes in its worker.
   */
  rgb: Buffer;
  bytes: Buffer;
  /**
   * Whether `bytes` are the caller's alone (segment()'s `lendUpload`): then renderOutput, told the
   * segmentation is rendered once (`giveUp`), moves them into the render or frees them.
   */
  ownBytes?: boolean;
  probe: Probe;
  /** The limits the upload was accepted under (the render decodes with them). */
  limits: ImageLimits;
  /** What the full-size mask is made from (full-size-mask.ts); fullSizeAlpha() makes it. */
  mask: MaskPlan;
  width: number;
  height: number;
  /** How sure the model was, 0..1 (see confidence.ts). */
  confidence: number;
  /** The image and mask at the model's size: a cheap, small view for whole-image estimates. */
  model: { rgb: Buffer; alpha: Buffer; width: number; height: number };
  /**
   * Of `timings.decode`, the milliseconds of the full-size decode made while the model call was
   * under way (segment()): work done, but not waited for.
   */
  decodedBesideMs?: number;
  /**
   * Milliseconds per stage so far. `inference` is session.run on the inference server;
   * `transfer` is the rest of the ModelInfer call (queueing, gRPC, copies).
   */
  timings: Partial<Record<Stage, number>>;
}

/** Formats accepted as input, by sharp's metadata name. AVIF reports as heif with av1 compression. */
const ACCEPTED_FORMATS = new Set(['jpeg', 'png', 'webp', 'gif', 'tiff', 'heif']);

export interface Probe {
  /** Upright size, after EXIF orientation. */
  width: number;
  height: number;
  format: string;
  hasAlpha: boolean;
  /** EXIF orientation, 1 (upright as stored) when none. */
  orientation?: number;
  /** libvips's band format of the decoded pixels ('uchar' for 8-bit), from the header. */
  depth?: string;
  /** libvips's colour space of the decoded pixels ('srgb', 'b-w', 'rgb16', 'cmyk', ...), from the header. */
  space?: string;
}

/** Reads the header only: type (sniffed from the bytes), upright size; refuses too many pixels before any decode. */
export async function probeImage(bytes: Buffer, limits: ImageLimits): Promise<Probe> {
  let meta: Metadata;
  try {
    meta = await sharp(bytes, { limitInputPixels: false }).metadata();
  } catch (error) {
    const message = (error as Error).message;
    if (/unsupported image format/i.test(message)) throw new ApiError('unsupported_image_type', { cause: error });
    throw new ApiError('corrupt_image', { cause: error });
  }
  const heifOk = meta.format !== 'heif' || meta.compression === 'av1';
  if (!meta.format || !ACCEPTED_FORMATS.has(meta.format) || !heifOk) {
    throw new ApiError('unsupported_image_type', {
      detail: `Images of type ${meta.format === 'heif' ? `heif/${meta.compression}` : meta.format} are not supported; send JPEG, PNG, WebP, AVIF, TIFF or GIF.`,
    });
  }
  if (!meta.width || !meta.height) throw new ApiError('corrupt_image', { detail: 'The image header has no size.' });
  const pixels = meta.width * meta.height;
  if (pixels > limits.maxInputPixels) {
    throw new ApiError('image_too_large', {
      detail: `The image is ${meta.width}x${meta.height} (${(pixels / 1e6).toFixed(1)} MP); the limit is ${(limits.maxInputPixels / 1e6).toFixed(1)} MP.`,
    });
  }
  // EXIF orientations 5-8 turn the image a quarter: the upright size swaps.
  const quarterTurn = (meta.orientation ?? 1) >= 5;
  return {
    width: quarterTurn ? meta.height : meta.width,
    height: quarterTurn ? meta.width : meta.height,
    format: meta.format === 'heif' ? 'avif' : meta.format,
    hasAlpha: Boolean(meta.hasAlpha),
    orientation: meta.orientation ?? 1,
    depth: meta.depth,
    space: meta.space,
  };
}

/**
 * The model's part of the work, for an image probeImage accepted: decode upright to 8-bit sRGB
 * (any colour space, ICC profile, bit depth; first frame of animations), resize and normalise for
 * the model, run it, and scale its mask back to the upright full size.
 */
export async function segment(
  bytes: Buffer,
  probe: Probe,
  profile: PreprocessingProfile,
  model: MaskModel,
  limits: ImageLimits,
  signal: AbortSignal,
  /**
   * Whether memory for the full size is to be had now: a small upright JPEG is then decoded once,
   * at full size, for both the model's input and the output, and another image of about the
   * model's size is decoded at full size in `pool` while the model runs (either kept in `rgb`);
   * else `rgb` is left empty and the render decodes the full size when it has the memory.
   */
  decodeAlongside = true,
  /** Where the confidence count on the model's grid runs (a few ms); without one, in this thread. */
  pool?: PixelPool,
  /** Taken around the decode (see DecodeGate); without one, the decode starts at once. */
  gate?: DecodeGate,
  /** Where the pool puts the model-size image (ModelInputJob's `modelImage`): shared unless the caller moves it on. */
  modelImage: 'shared' | 'movable' = 'shared',
  /**
   * The caller alone holds `bytes` (a synchronous request's upload) and reads them no more: they
   * are lent to the pool's tasks that read them (moved there and back, pixel-pool.ts's lend()),
   * and the segmentation's `bytes` are the ones that came back (`ownBytes`); the caller's read as
   * empty. Needs `pool`.
   */
  lendUpload = false,
): Promise<Segmentation> {
  let mark = performance.now();
  const lap = () => {
    const now = performance.now();
    const elapsed = now - mark;
    mark = now;
    return elapsed;
  };

  // An upright, opaque JPEG too small for shrink-on-load (sharp shrinks JPEGs on load from half
  // the size up) is decoded once, at full size, and resized from there: the same pixels as two
  // decodes (a rotated or 16-bit source would resize differently, so those decode twice).
  const decodeOnce = decodeAlongside && probe.format === 'jpeg' && !probe.hasAlpha && (probe.orientation ?? 1) === 1 && modelSized(probe, profile);
  // A lone request on a pool with idle workers is rendered in row bands by several of them
  // (render-bands.ts), which all read the model-size image: in shared memory then. Under load
  // (no idle workers) it is moved as the caller asked, and the render is one task.
  const image = modelImage === 'movable' && pool?.splitsRenders() ? 'shared' : modelImage;
  const job = { bytes, probe, limits, profile, prefix: model.prefix?.({ width: profile.width, height: profile.height }), decodeOnce, modelImage: image };
  // The decode budget (DecodeGate) is held while the model's input is decoded and written, and
  // let go before the model runs. In the pool's worker when there is one: the model-size
  // decode's buffer and the tensor's bytes are made and written there, and only moved to this
  // thread.
  const release = gate ? await gate(probe.width * probe.height, signal) : undefined;
  let prepared: Awaited<ReturnType<typeof prepareModelInput>>;
  try {
    prepared = pool ? await pool.modelInput(job, lendUpload) : await prepareModelInput(job);
  } finally {
    release?.();
  }
  // A lent upload is back (or was copied, and the caller's is as it was).
  const back = (prepared as { bytes?: Buffer }).bytes;
  if (back) bytes = back;
  const { input, rgb: modelRgb, decoded: once, preprocessMs } = prepared;
  // Decoding, with the waits for the budget and a worker and the move back.
  const decodeMs = lap() - preprocessMs;
  // The full-size decode the render would make after the model, made while the model runs
  // instead (the same decode, earlier: off the request's critical path): for the images
  // decodeOnce would take by size but leaves to two decodes (not JPEG, with alpha, turned, 16-bit).
  const beside = !once && decodeAlongside && pool && modelSized(probe, profile) ? pool.fullDecode(bytes, probe, limits, lendUpload) : undefined;
  let answer: Awaited<ReturnType<MaskModel>>;
  try {
    answer = await model(input, signal, { width: profile.width, height: profile.height });
  } catch (error) {
    // Not left running past the request (its pixel budget is let go after this).
    await beside?.catch(() => undefined);
    throw error;
  }
  const { mask, serverRunMs } = answer;
  const modelMs = lap();
  const full = beside && (await beside);
  if (full && full.bytes) bytes = full.bytes;
  const { width, height } = probe;

  if (mask.length !== profile.width * profile.height) throw new Error(`model returned ${mask.length} mask values`);
  // In shared memory (shared-bytes.ts): the confidence count, the working view, `best`'s crop and
  // merges and the render each take the mask in a worker, and would each copy it here otherwise.
  const grey = sharedCopy(maskToGrey(mask, profile.minMaxNormalize, profile.outputActivation === 'sigmoid'));
  const confidence = pool ? await pool.looksConfidence(grey, profile.width, profile.height, [], 0) : cutoutConfidence(grey, profile.width, profile.height);
  const postprocessMs = lap();

  const inferenceMs = serverRunMs ?? modelMs;
  return {
    bytes,
    ...(lendUpload && pool ? { ownBytes: true } : {}),
    probe,
    limits,
    rgb: once ?? full?.decoded ?? Buffer.alloc(0),
    mask: { grey, width: profile.width, height: profile.height, parts: [] },
    width,
    height,
    model: { rgb: modelRgb, alpha: grey, width: profile.width, height: profile.height },
    confidence,
    ...(full ? { decodedBesideMs: full.decodeMs } : {}),
    timings: {
      // The decode beside the model is counted here too (work done, though not waited for).
      decode: decodeMs + (full?.decodeMs ?? 0),
      preprocess: preprocessMs,
      transfer: modelMs - inferenceMs,
      inference: inferenceMs,
      postprocess: postprocessMs,
    },
  };
}

/**
 * Whether an image is too small for JPEG shrink-on-load at the model's size (sharp shrinks on load
 * from half the size up): its full-size decode costs about what its model-size decode does, and
 * is decoded while the model runs (segment()) when memory for it is to be had. Larger images
 * keep it for the render, which holds it for less time.
 */
function modelSized(probe: Probe, profile: PreprocessingProfile): boolean {
  return Math.min(probe.width / profile.width, probe.height / profile.height) < 2;
}

/**
 * The segmentation's full-size mask (a mask alone, as measured against a ground truth: the
 * input's own alpha is folded in when the output is rendered), made in a worker of `pool`.
 */
export async function fullSizeAlpha(seg: Segmentation, pool: PixelPool): Promise<Buffer> {
  const started = performance.now();
  const alpha = await pool.fullSizeMask(seg.mask, seg.width, seg.height);
  seg.timings.postprocess = (seg.timings.postprocess ?? 0) + performance.now() - started;
  return alpha;
}
