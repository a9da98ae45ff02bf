import sharp, { type Sharp } from 'sharp';
import type { Rgba } from '../output-options.js';

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
