/**
 * Decoding an upload (libvips, through sharp: on libuv's threads, in whichever thread calls it):
 * at full size for the output, or straight to the model's size for its input.
 */
import sharp from 'sharp';
import { ApiError } from '../errors.js';
import { enlargesExactly, enlargesTurnedExactly, resizeFillRgb, resizeFillRgbTurned } from './fill-resize.js';
import type { ImageLimits, Probe } from './pipeline.js';
import type { PreprocessingProfile } from './profile.js';

/**
 * Every decode of an upload starts here: failOn 'error' refuses truncated data instead of
 * returning a half-grey picture; autoOrient turns the image upright first; toColourspace converts
 * CMYK, grey and ICC-tagged input to sRGB.
 */
export function openDecoder(bytes: Buffer, limits: ImageLimits, options: { asStored?: boolean } = {}) {
  return sharp(bytes, { limitInputPixels: limits.maxInputPixels, failOn: 'error', autoOrient: !options.asStored }).toColourspace('srgb');
}

/**
 * The upload decoded upright, straight to the model's size: JPEG shrink-on-load makes big photos
 * cheap here. Transparent parts are shown to the model on white, as a viewer would show them.
 * `decoded`: the upright full-size opaque decode when there is one already (resized from it).
 */
export async function decodeForModel(
  bytes: Buffer,
  probe: Probe,
  limits: ImageLimits,
  profile: PreprocessingProfile,
  decoded?: Buffer,
  /** Memory for the result where the JS enlarge writes it (resizeFillRgb's `allocate`). */
  allocate?: (bytes: number) => Buffer,
): Promise<Buffer> {
  try {
    // An EXIF-turned photo that grows: resized in its stored frame and turned after, as sharp does it.
    const grows = profile.width > probe.width || profile.height > probe.height;
    if (!decoded && grows && (probe.orientation ?? 1) !== 1 && enlargesTurnedExactly(probe)) {
      const stored = openDecoder(bytes, limits, { asStored: true });
      const opaque = probe.hasAlpha ? stored.flatten({ background: '#ffffff' }) : stored.removeAlpha();
      return await resizeFillRgbTurned(opaque, probe.width, probe.height, profile.width, profile.height, probe.orientation!);
    }
    const input = decoded
      ? sharp(decoded, { raw: { width: probe.width, height: probe.height, channels: 3 } })
      : probe.hasAlpha
        ? openDecoder(bytes, limits).flatten({ background: '#ffffff' })
        : openDecoder(bytes, limits).removeAlpha();
    // A growing axis (a photo under the model's size) is enlarged in JS, the same bytes (fill-resize.ts).
    return await resizeFillRgb(input, probe.width, probe.height, profile.width, profile.height, decoded !== undefined || enlargesExactly(probe), allocate, undefined, decoded);
  } catch (error) {
    throw new ApiError('corrupt_image', { cause: error });
  }
}

/** The upright full-size 8-bit sRGB (RGBA when the image has alpha) decode. */
export async function decodeRaw(bytes: Buffer, probe: Probe, limits: ImageLimits): Promise<Buffer> {
  try {
    const base = openDecoder(bytes, limits);
    const { data, info } = await (probe.hasAlpha ? base.ensureAlpha() : base.removeAlpha()).raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
    if (info.width !== probe.width || info.height !== probe.height || info.channels !== (probe.hasAlpha ? 4 : 3)) {
      throw new Error('the decoded image does not match its header');
    }
    return data;
  } catch (error) {
    throw new ApiError('corrupt_image', { cause: error });
  }
}

