/**
 * sharp's `resize(w, h, { fit: 'fill' })` to raw 8-bit RGB, the same bytes, with any growing axis
 * done by enlargeBicubic instead of libvips's 2-D bicubic affine (bicubic-enlarge.ts says why).
 * vips_resize reduces the shrinking axes first and enlarges after, so sharp is asked for the
 * reduce alone (the growing axes kept at their size) and the result is enlarged here. Runs in the
 * pixel pool's worker (the model-input and pass-input steps are its tasks).
 */
import type { Sharp } from 'sharp';
import { enlargeBicubic } from './bicubic-enlarge.js';
import type { Probe } from './pipeline.js';

/**
 * Whether the two steps give sharp's one-call bytes for a pipeline decoding these bytes: only
 * when the decoded pixels are 8-bit sRGB or grey, upright as stored. sharp resizes an image with
 * an EXIF turn or flip before turning it (libvips's enlarge is not symmetric, so enlarging the
 * upright pixels differs), and resizes 16-bit or other colour spaces before converting them to
 * 8-bit sRGB. Those keep the one call (the same bytes as before, at libvips's cost).
 */
export function enlargesExactly(probe: Probe): boolean {
  return (probe.orientation ?? 1) === 1 && probe.depth === 'uchar' && (probe.space === 'srgb' || probe.space === 'b-w');
}

/**
 * `image` (width x height as sharp will see it before resizing) resized to outWidth x outHeight
 * with fit 'fill', as raw 8-bit RGB. `exact`: the two-step form is byte-identical for this
 * pipeline (enlargesExactly, or raw 8-bit RGB input); else, or when no axis grows, the one call.
 */
export async function resizeFillRgb(image: Sharp, width: number, height: number, outWidth: number, outHeight: number, exact: boolean): Promise<Buffer> {
  if (!exact || (outWidth <= width && outHeight <= height)) {
    return image.resize(outWidth, outHeight, { fit: 'fill' }).raw({ depth: 'uchar' }).toBuffer();
  }
  const w = Math.min(width, outWidth);
  const h = Math.min(height, outHeight);
  const reduced = w === width && h === height ? image : image.resize(w, h, { fit: 'fill' });
  const { data, info } = await reduced.raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
  if (info.width !== w || info.height !== h || info.channels !== 3) {
    throw new Error(`resizeFillRgb: the reduce gave ${info.width}x${info.height}x${info.channels}, not ${w}x${h}x3`);
  }
  return enlargeBicubic(data, w, h, 3, outWidth, outHeight);
}
