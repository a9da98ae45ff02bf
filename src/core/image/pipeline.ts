import sharp, { type Metadata } from 'sharp';
import { ApiError } from '../errors.js';
import type { PreprocessingProfile } from './profile.js';
import { maskToGrey, rgbToTensor } from './tensor.js';

export interface ImageLimits {
  /** Largest image accepted, in pixels (width x height), checked from the header before decoding. */
  maxInputPixels: number;
}

export interface EncodeOptions {
  /** zlib level of the PNG output, 0-9: lower is faster and larger. */
  pngCompressionLevel: number;
}

/** Runs the model on a normalised input tensor and resolves with its float mask. */
export type MaskModel = (input: Float32Array, signal: AbortSignal) => Promise<{ mask: Float32Array; serverRunMs?: number | undefined }>;

export type Stage = 'decode' | 'preprocess' | 'transfer' | 'inference' | 'postprocess' | 'encode';

export interface Cutout {
  png: Buffer;
  width: number;
  height: number;
  /**
   * Milliseconds per stage, for Server-Timing and benchmarks. `inference` is session.run on the
   * inference server; `transfer` is the rest of the ModelInfer call (queueing, gRPC, copies).
   */
  timings: Record<Stage, number>;
}

/** Formats accepted as input, by sharp's metadata name. AVIF reports as heif with av1 compression. */
const ACCEPTED_FORMATS = new Set(['jpeg', 'png', 'webp', 'gif', 'tiff', 'heif']);

export interface Probe {
  /** Upright size, after EXIF orientation. */
  width: number;
  height: number;
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
  return quarterTurn ? { width: meta.height, height: meta.width } : { width: meta.width, height: meta.height };
}

/**
 * The whole image path, for an image probeImage accepted: decode upright to 8-bit sRGB, resize and normalise for the
 * model, run it, scale its mask back to the upright full size, attach it as alpha, encode PNG.
 */
export async function cutOut(
  bytes: Buffer,
  probe: Probe,
  profile: PreprocessingProfile,
  model: MaskModel,
  options: ImageLimits & EncodeOptions,
  signal: AbortSignal,
): Promise<Cutout> {
  let mark = performance.now();
  const lap = () => {
    const now = performance.now();
    const elapsed = now - mark;
    mark = now;
    return elapsed;
  };

  // First frame only (sharp's default for animations); failOn 'error' refuses truncated data
  // instead of returning a half-grey picture; autoOrient turns the image upright first.
  const decoder = () => sharp(bytes, { limitInputPixels: options.maxInputPixels, failOn: 'error', autoOrient: true }).toColourspace('srgb').removeAlpha();
  let modelRgb: Buffer;
  try {
    // Straight from the encoded bytes to the model's size: JPEG shrink-on-load makes big photos cheap here.
    modelRgb = await decoder().resize(profile.width, profile.height, { fit: 'fill' }).raw({ depth: 'uchar' }).toBuffer();
  } catch (error) {
    throw new ApiError('corrupt_image', { cause: error });
  }
  const decodeMs = lap();
  const input = rgbToTensor(modelRgb, profile);
  const preprocessMs = lap();

  // The full-size decode, needed only for the output, runs while the model does.
  const fullSize = decoder()
    .raw({ depth: 'uchar' })
    .toBuffer({ resolveWithObject: true })
    .catch((error: unknown) => {
      throw new ApiError('corrupt_image', { cause: error });
    });
  const [{ mask, serverRunMs }, decoded] = await Promise.all([model(input, signal), fullSize]);
  const modelMs = lap();
  const { width, height, channels } = decoded.info;
  if (channels !== 3 || width !== probe.width || height !== probe.height) {
    throw new ApiError('corrupt_image', { detail: 'The decoded image does not match its header.' });
  }
  const rgb = decoded.data;
  const raw = { width, height, channels: 3 as const };

  if (mask.length !== profile.width * profile.height) throw new Error(`model returned ${mask.length} mask values`);
  const grey = maskToGrey(mask, profile.minMaxNormalize);
  const alpha = await sharp(grey, { raw: { width: profile.width, height: profile.height, channels: 1 } })
    // Bilinear: a smooth mask upscale, and the cheapest kernel that is not blocky.
    .resize(width, height, { fit: 'fill', kernel: 'linear' })
    .extractChannel(0)
    .raw()
    .toBuffer();
  const postprocessMs = lap();

  const png = await sharp(interleaveRgba(rgb, alpha), { raw: { width, height, channels: 4 } })
    .png({ compressionLevel: options.pngCompressionLevel })
    .toBuffer();
  const encodeMs = lap();

  const inferenceMs = serverRunMs ?? modelMs;
  return {
    png,
    width,
    height,
    timings: {
      decode: decodeMs,
      preprocess: preprocessMs,
      transfer: modelMs - inferenceMs,
      inference: inferenceMs,
      postprocess: postprocessMs,
      encode: encodeMs,
    },
  };
}

/**
 * RGB + alpha to RGBA, with the colour of fully transparent pixels cleared: they are invisible,
 * keeping them would ship the removed background inside the file, and cleared runs make the
 * PNG about four times smaller and faster to encode.
 */
export function interleaveRgba(rgb: Buffer, alpha: Buffer): Buffer {
  const pixels = alpha.length;
  const rgba = Buffer.allocUnsafe(pixels * 4);
  for (let i = 0, j = 0, k = 0; i < pixels; i++, j += 3, k += 4) {
    const a = alpha[i]!;
    if (a === 0) {
      rgba[k] = 0;
      rgba[k + 1] = 0;
      rgba[k + 2] = 0;
    } else {
      rgba[k] = rgb[j]!;
      rgba[k + 1] = rgb[j + 1]!;
      rgba[k + 2] = rgb[j + 2]!;
    }
    rgba[k + 3] = a;
  }
  return rgba;
}
