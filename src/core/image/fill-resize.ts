/**
 * sharp's `resize(w, h, { fit: 'fill' })` to raw 8-bit RGB, the same bytes, with any growing axis
 * done by enlargeBicubic instead of libvips's 2-D bicubic affine (bicubic-enlarge.ts says why).
 * vips_resize reduces the shrinking axes first and enlarges after, so the reduce is done first
 * (a width-only one by lanczos-reduce.ts on the decoded pixels, any other by sharp, the growing
 * axes kept at their size) and the result is enlarged here. Runs in the
 * pixel pool's worker (the model-input and pass-input steps are its tasks).
 */
import sharp, { type Sharp } from 'sharp';
import { ENLARGE_TILE_WIDTH, enlargeBicubic } from './bicubic-enlarge.js';
import { reduceHorizontal, reducesWidthExactly } from './lanczos-reduce.js';
import type { Probe } from './pipeline.js';

/**
 * Whether the two steps give sharp's one-call bytes for a pipeline decoding these bytes: only
 * when the decoded pixels are 8-bit sRGB or grey, upright as stored. sharp resizes an image with
 * an EXIF turn or flip before turning it (libvips's enlarge is not symmetric, so enlarging the
 * upright pixels differs: see resizeFillRgbTurned for those), and resizes 16-bit or other colour
 * spaces before converting them to 8-bit sRGB. Those keep the one call (the same bytes as before,
 * at libvips's cost).
 */
export function enlargesExactly(probe: Probe): boolean {
  return (probe.orientation ?? 1) === 1 && eightBitSrgb(probe);
}

/**
 * Whether the two steps give sharp's one-call bytes for a region of these bytes (a pre-resize
 * `extract`, as `best`'s region passes take): 8-bit sRGB or grey, in any EXIF orientation. An
 * extract makes sharp turn the image upright first (sharp's `orientBefore`: pipeline.cc rotates
 * and flops before the pre-resize extract), so the region is resized in the upright frame, as the
 * two steps do it, with the enlarge in tiles where the turn is a quarter (regionTileWidth).
 * Without an extract the image is resized in its stored frame (enlargesExactly,
 * resizeFillRgbTurned).
 */
export function enlargesRegionExactly(probe: Probe): boolean {
  return eightBitSrgb(probe);
}

/**
 * The tile width libvips enlarges a region of these bytes in: a quarter turn (EXIF 5-8) is
 * libvips's rot90, which asks for small tiles, and the resize after it makes its output in them;
 * otherwise whole-width strips (undefined).
 */
export function regionTileWidth(probe: Probe): number | undefined {
  return (probe.orientation ?? 1) >= 5 ? ENLARGE_TILE_WIDTH : undefined;
}

/** Whether resizeFillRgbTurned gives sharp's one-call bytes: an EXIF-turned 8-bit sRGB or grey image. */
export function enlargesTurnedExactly(probe: Probe): boolean {
  return (probe.orientation ?? 1) in UPRIGHT && eightBitSrgb(probe);
}

function eightBitSrgb(probe: Probe): boolean {
  return probe.depth === 'uchar' && (probe.space === 'srgb' || probe.space === 'b-w');
}

/**
 * What sharp does to turn the stored pixels upright for each EXIF orientation, in sharp's order
 * (rotate, then flip, then flop); test/bicubic-enlarge.test.ts checks every one against sharp's
 * own autoOrient.
 */
const UPRIGHT: Record<number, { angle: number; flip: boolean; flop: boolean }> = {
  2: { angle: 0, flip: false, flop: true },
  3: { angle: 180, flip: false, flop: false },
  4: { angle: 180, flip: false, flop: true },
  5: { angle: 90, flip: true, flop: false },
  6: { angle: 90, flip: false, flop: false },
  7: { angle: 270, flip: true, flop: false },
  8: { angle: 270, flip: false, flop: false },
};

/**
 * The same as resizeFillRgb with `exact`, for an image with an EXIF orientation of 2-8: `stored`
 * decodes it as stored (no autoOrient), `width` x `height` is its upright size. sharp resizes
 * such an image in its stored frame (the target turned with it) and turns the result upright, so
 * this does the same: the reduce by sharp and the enlarge here in the stored frame, then sharp
 * turns the raw result (a turn or flip moves bytes, so it is exact). An axis must grow (else
 * the caller's one call is as cheap).
 */
export async function resizeFillRgbTurned(stored: Sharp, width: number, height: number, outWidth: number, outHeight: number, orientation: number): Promise<Buffer> {
  const turn = UPRIGHT[orientation];
  if (!turn) throw new RangeError(`resizeFillRgbTurned: orientation ${orientation}`);
  if (outWidth <= width && outHeight <= height) throw new RangeError('resizeFillRgbTurned: no axis grows');
  const quarter = orientation >= 5;
  const enlarged = await resizeFillRgb(stored, quarter ? height : width, quarter ? width : height, quarter ? outHeight : outWidth, quarter ? outWidth : outHeight, true);
  let upright = sharp(enlarged, { raw: { width: quarter ? outHeight : outWidth, height: quarter ? outWidth : outHeight, channels: 3 } });
  if (turn.angle) upright = upright.rotate(turn.angle);
  if (turn.flip) upright = upright.flip();
  if (turn.flop) upright = upright.flop();
  return upright.raw().toBuffer();
}

/**
 * `image` (width x height as sharp will see it before resizing) resized to outWidth x outHeight
 * with fit 'fill', as raw 8-bit RGB. `exact`: the two-step form is byte-identical for this
 * pipeline (enlargesExactly, or raw 8-bit RGB input); else, or when no axis grows, the one call.
 */
export async function resizeFillRgb(
  image: Sharp,
  width: number,
  height: number,
  outWidth: number,
  outHeight: number,
  exact: boolean,
  /** Memory for the result when this step writes it (an axis grows), e.g. shared memory (shared-bytes.ts); else a fresh buffer. */
  allocate?: (bytes: number) => Buffer,
  /** libvips makes this pipeline's output in tiles this wide (regionTileWidth). */
  tileWidth?: number,
  /** `image`'s pixels (width x height x 3) when the caller has them decoded: the reduce here reads them, not a decode of `image`. */
  pixels?: Buffer,
): Promise<Buffer> {
  if (!exact || (outWidth <= width && outHeight <= height)) {
    return image.resize(outWidth, outHeight, { fit: 'fill' }).raw({ depth: 'uchar' }).toBuffer();
  }
  const w = Math.min(width, outWidth);
  const h = Math.min(height, outHeight);
  // Only the width shrinks, in whole-width strips (no tiles: libvips's reduceh restarts its
  // position at each tile's left edge): the decoded pixels go straight to lanczos-reduce.ts,
  // the same bytes without sharp's resize pipeline.
  if (w < width && h === height && tileWidth === undefined && reducesWidthExactly(width, w)) {
    const data = pixels ?? (await decodedRgb(image, width, height));
    if (data.length !== width * height * 3) throw new RangeError(`resizeFillRgb: ${data.length} bytes of pixels for ${width}x${height}x3`);
    const reducedRaw = reduceHorizontal(data, width, height, 3, w, { transient: true });
    return enlargeBicubic(reducedRaw, w, h, 3, outWidth, outHeight, { ...(allocate ? { into: allocate(outWidth * outHeight * 3) } : {}), tileWidth });
  }
  const reduced = w === width && h === height ? image : image.resize(w, h, { fit: 'fill' });
  const { data, info } = await reduced.raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
  if (info.width !== w || info.height !== h || info.channels !== 3) {
    throw new Error(`resizeFillRgb: the reduce gave ${info.width}x${info.height}x${info.channels}, not ${w}x${h}x3`);
  }
  return enlargeBicubic(data, w, h, 3, outWidth, outHeight, { ...(allocate ? { into: allocate(outWidth * outHeight * 3) } : {}), tileWidth });
}

async function decodedRgb(image: Sharp, width: number, height: number): Promise<Buffer> {
  const { data, info } = await image.raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
  if (info.width !== width || info.height !== height || info.channels !== 3) {
    throw new Error(`resizeFillRgb: the decode gave ${info.width}x${info.height}x${info.channels}, not ${width}x${height}x3`);
  }
  return data;
}
