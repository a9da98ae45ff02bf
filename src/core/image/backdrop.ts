import sharp, { type Sharp } from 'sharp';
import { ApiError } from '../errors.js';
import type { Rgba } from '../output-options.js';

/** The multipart part that carries a background image (remove.bg's `bg_image_file` is read into it). */
export const BACKGROUND_PART = 'bg_image';

/**
 * The cutout (RGBA, `width` x `height`) put over a background colour, in libvips: for the steps
 * that need the cutout transparent until the end (`add_shadow`). Opaque colours flatten to RGB.
 */
export async function overColor(image: Sharp, width: number, height: number, color: Rgba): Promise<{ image: Sharp; channels: 3 | 4 }> {
  if (color.alpha >= 1) {
    const data = await image.flatten({ background: { r: color.r, g: color.g, b: color.b } }).raw().toBuffer();
    return { image: sharp(data, { raw: { width, height, channels: 3 } }), channels: 3 };
  }
  const cutout = await image.raw().toBuffer();
  const data = await sharp({ create: { width, height, channels: 4, background: color } })
    .composite([{ input: cutout, raw: { width, height, channels: 4 } }])
    .raw()
    .toBuffer();
  return { image: sharp(data, { raw: { width, height, channels: 4 } }), channels: 4 };
}

/**
 * `bg_image` / `bg_image_url`: the cutout (RGBA, `width` x `height`) put over a photo, in libvips.
 * The photo is turned upright and cover-fitted to the canvas: scaled (aspect kept) until it
 * covers both sides, its centre kept, the overflow cut off. An opaque photo gives RGB; one with
 * transparency keeps it (flattened on white when `flatten`: for formats without alpha).
 */
export async function overPhoto(image: Sharp, width: number, height: number, photo: Buffer, flatten: boolean): Promise<{ image: Sharp; channels: 3 | 4 }> {
  const raw4 = { raw: { width, height, channels: 4 as const } };
  let base: Sharp;
  let photoHasAlpha: boolean;
  try {
    // Its size was checked from its header (pipeline/background-image.ts); a failed decode is the photo's fault.
    const source = sharp(photo, { limitInputPixels: false, failOn: 'error', autoOrient: true });
    photoHasAlpha = Boolean((await source.metadata()).hasAlpha);
    const fitted = await source.resize(width, height, { fit: 'cover', position: 'centre' }).toColourspace('srgb').ensureAlpha().raw({ depth: 'uchar' }).toBuffer();
    base = sharp(fitted, raw4);
  } catch (error) {
    throw new ApiError('bg_image_invalid', { detail: 'The background image could not be decoded.', cause: error });
  }
  const cutout = await image.ensureAlpha().raw().toBuffer();
  const composed = sharp(await base.composite([{ input: cutout, ...raw4 }]).raw().toBuffer(), raw4);
  if (!photoHasAlpha || flatten) {
    const data = await composed.flatten({ background: { r: 255, g: 255, b: 255 } }).raw().toBuffer();
    return { image: sharp(data, { raw: { width, height, channels: 3 } }), channels: 3 };
  }
  return { image: composed, channels: 4 };
}
