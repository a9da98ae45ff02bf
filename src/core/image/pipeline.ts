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
export type MaskModel = (input: Float32Array, signal: AbortSignal) => Promise<Float32Array>;

export interface Cutout {
  png: Buffer;
  width: number;
  height: number;
  /** Milliseconds per stage, for Server-Timing and benchmarks. */
  timings: Record<'decode' | 'preprocess' | 'inference' | 'postprocess' | 'encode', number>;
}

/** Formats accepted as input, by sharp's metadata name. AVIF reports as heif with av1 compression. */
const ACCEPTED_FORMATS = new Set(['jpeg', 'png', 'webp', 'gif', 'tiff', 'heif']);

interface Probe {
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
 * The whole image path: probe, decode upright to 8-bit sRGB, resize and normalise for the
 * model, run it, scale its mask back to the upright full size, attach it as alpha, encode PNG.
 */
export async function cutOut(
  bytes: Buffer,
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

  const probe = await probeImage(bytes, options);
  let rgb: Buffer;
  let width: number;
  let height: number;
  try {
    // First frame only (sharp's default for animations); failOn 'error' refuses truncated data
    // instead of returning a half-grey picture.
    const decoded = await sharp(bytes, { limitInputPixels: options.maxInputPixels, failOn: 'error', autoOrient: true })
      .toColourspace('srgb')
      .removeAlpha()
      .raw({ depth: 'uchar' })
      .toBuffer({ resolveWithObject: true });
    ({ width, height } = decoded.info);
    rgb = decoded.data;
    if (decoded.info.channels !== 3) throw new Error(`decoded to ${decoded.info.channels} channels`);
  } catch (error) {
    throw new ApiError('corrupt_image', { cause: error });
  }
  if (width !== probe.width || height !== probe.height) {
    throw new ApiError('corrupt_image', { detail: 'The decoded size differs from the header.' });
  }
  const raw = { width, height, channels: 3 as const };
  const decodeMs = lap();

  const modelRgb = await sharp(rgb, { raw })
    .resize(profile.width, profile.height, { fit: 'fill' })
    .raw()
    .toBuffer();
  const input = rgbToTensor(modelRgb, profile);
  const preprocessMs = lap();

  const mask = await model(input, signal);
  const inferenceMs = lap();

  if (mask.length !== profile.width * profile.height) throw new Error(`model returned ${mask.length} mask values`);
  const grey = maskToGrey(mask, profile.minMaxNormalize);
  const alpha = await sharp(grey, { raw: { width: profile.width, height: profile.height, channels: 1 } })
    .resize(width, height, { fit: 'fill' })
    .extractChannel(0)
    .raw()
    .toBuffer();
  const postprocessMs = lap();

  const png = await sharp(rgb, { raw })
    .joinChannel(alpha, { raw: { width, height, channels: 1 } })
    .png({ compressionLevel: options.pngCompressionLevel })
    .toBuffer();
  const encodeMs = lap();

  return {
    png,
    width,
    height,
    timings: { decode: decodeMs, preprocess: preprocessMs, inference: inferenceMs, postprocess: postprocessMs, encode: encodeMs },
  };
}
