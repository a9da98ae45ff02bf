import sharp, { type Metadata, type OutputInfo } from 'sharp';
import { ApiError } from '../errors.js';
import { countKernel } from './kernel-calls.js';
import type { Probe } from './pipeline.js';

/**
 * `hints`: an optional image part marking pixels to keep or to remove (scribbles a person made in
 * an editor, or with the dashboard's brush). Its encoding, per pixel of the hint image, after its
 * own EXIF orientation:
 *
 * - transparent (alpha < 128): no hint;
 * - light (luma >= 192, e.g. white): keep — the cutout's alpha is exactly 255 there;
 * - dark (luma <= 63, e.g. black): remove — alpha exactly 0;
 * - anything between (e.g. mid grey 128): no hint.
 *
 * So a transparent PNG layer with white and black strokes, or a grey canvas painted white and
 * black, both work. The hint image covers the input as it is displayed (EXIF orientation
 * applied), at its size or scaled (its aspect ratio must match: HINTS_ASPECT_TOLERANCE); it is
 * sampled nearest-neighbour, so a hint made on a small preview applies to the full-size image.
 *
 * Around the strokes the hints are blended into the model's mask: within `hintBandWidth` px of a
 * keep (remove) stroke the alpha moves linearly from 255 (0) to the model's value, by the 3-4
 * chamfer distance (within 6 % of the Euclidean one); farther away the model's mask is untouched.
 * Where keep and remove bands overlap, their weights are shared out in proportion.
 */

/** Luma at or above this is "keep"; at or below HINT_REMOVE_MAX "remove"; alpha below HINT_OPAQUE_MIN is no hint. */
export const HINT_KEEP_MIN = 192;
export const HINT_REMOVE_MAX = 63;
export const HINT_OPAQUE_MIN = 128;
/** The multipart part that carries hints. */
export const HINTS_FIELD = 'hints';
/** Most bytes of a hints part. */
export const MAX_HINTS_BYTES = 8 * 1024 * 1024;
/** The hints' aspect ratio may differ from the input's by this share, or by a pixel of rounding. */
export const HINTS_ASPECT_TOLERANCE = 0.01;
const HINT_FORMATS = new Set(['png', 'jpeg', 'webp', 'gif', 'tiff']);

/** Width in px of the band where hints blend into the model's mask: the long side / 128, 2 to 48 px. */
export function hintBandWidth(width: number, height: number): number {
  return Math.max(2, Math.min(48, Math.round(Math.max(width, height) / 128)));
}

/** What the main thread checked of a hints part: its upright size. */
export interface HintsProbe {
  width: number;
  height: number;
}

/**
 * Checks a hints part's header against the input (no decode; libvips reads the header off the
 * event loop): an image bgcut reads, within `maxPixels`, of the input's aspect ratio.
 */
export async function probeHints(bytes: Buffer, input: Probe, maxPixels: number): Promise<HintsProbe> {
  let meta: Metadata;
  try {
    meta = await sharp(bytes, { limitInputPixels: false }).metadata();
  } catch {
    throw new ApiError('invalid_hints', { detail: 'hints: not an image bgcut can read; send a PNG (white = keep, black = remove, transparent = no hint).' });
  }
  if (!meta.format || !HINT_FORMATS.has(meta.format) || !meta.width || !meta.height) {
    throw new ApiError('invalid_hints', { detail: `hints: images of type ${meta.format ?? 'unknown'} are not read; send a PNG (or JPEG, WebP, GIF, TIFF).` });
  }
  if (meta.width * meta.height > maxPixels) {
    throw new ApiError('invalid_hints', { detail: `hints: ${meta.width}x${meta.height} is more than ${(maxPixels / 1e6).toFixed(1)} MP.` });
  }
  const quarterTurn = (meta.orientation ?? 1) >= 5;
  const width = quarterTurn ? meta.height : meta.width;
  const height = quarterTurn ? meta.width : meta.height;
  // The input's height for the hints' width: within a pixel of rounding, or 1 %, it is the same picture.
  const expectedHeight = (width * input.height) / input.width;
  if (Math.abs(height - expectedHeight) > Math.max(1, expectedHeight * HINTS_ASPECT_TOLERANCE)) {
    throw new ApiError('hints_size_mismatch', {
      detail: `hints: ${width}x${height} does not have the image's aspect ratio (${input.width}x${input.height} as displayed, EXIF orientation applied); send it at that size or scaled to it.`,
    });
  }
  return { width, height };
}

const KEEP = 1;
const REMOVE = 2;

/** Per pixel of the hint image: 0 no hint, KEEP or REMOVE; null when it has no hint at all. */
async function hintClasses(bytes: Buffer, maxPixels: number): Promise<{ classes: Uint8Array; width: number; height: number } | null> {
  let decoded: { data: Buffer; info: OutputInfo };
  try {
    decoded = await sharp(bytes, { limitInputPixels: maxPixels, failOn: 'error', autoOrient: true })
      .toColourspace('srgb')
      .ensureAlpha()
      .raw({ depth: 'uchar' })
      .toBuffer({ resolveWithObject: true });
  } catch {
    throw new ApiError('invalid_hints', { detail: 'hints: the image is truncated or corrupt.' });
  }
  const { data, info } = decoded;
  const classes = new Uint8Array(info.width * info.height);
  let any = false;
  for (let i = 0, k = 0; i < classes.length; i++, k += info.channels) {
    if (data[k + 3]! < HINT_OPAQUE_MIN) continue;
    const luma = (77 * data[k]! + 150 * data[k + 1]! + 29 * data[k + 2]!) >> 8;
    if (luma >= HINT_KEEP_MIN) classes[i] = KEEP;
    else if (luma <= HINT_REMOVE_MAX) classes[i] = REMOVE;
    else continue;
    any = true;
  }
  return any ? { classes, width: info.width, height: info.height } : null;
}

/**
 * Applies a hints part to the upright full-size mask, in place (a pixel-pool worker runs it):
 * exact where it marks, blended over hintBandWidth px around. Work outside the strokes' box
 * (grown by the band) is skipped.
 */
export async function applyHints(alpha: Buffer, width: number, height: number, bytes: Buffer, maxPixels: number): Promise<void> {
  const hints = await hintClasses(bytes, maxPixels);
  if (!hints) return;
  countKernel('applyHints');
  const { classes, width: hw, height: hh } = hints;
  // Nearest-neighbour: full-size column x reads hint column hx[x].
  const hx = new Int32Array(width);
  for (let x = 0; x < width; x++) hx[x] = Math.min(hw - 1, Math.floor(((x + 0.5) * hw) / width));
  const hy = (y: number) => Math.min(hh - 1, Math.floor(((y + 0.5) * hh) / height));

  // The strokes' box, found on the hint image and taken to full size (a pixel wider each side
  // for rounding), grown by the band.
  const band = hintBandWidth(width, height);
  let top0 = hh;
  let bottom0 = -1;
  let left0 = hw;
  let right0 = -1;
  for (let y = 0; y < hh; y++) {
    for (let x = 0; x < hw; x++) {
      if (classes[y * hw + x] === 0) continue;
      if (y < top0) top0 = y;
      bottom0 = y;
      if (x < left0) left0 = x;
      if (x > right0) right0 = x;
    }
  }
  const left = Math.max(0, Math.floor((left0 * width) / hw) - 1 - band);
  const top = Math.max(0, Math.floor((top0 * height) / hh) - 1 - band);
  const right = Math.min(width - 1, Math.ceil(((right0 + 1) * width) / hw) + band);
  const bottom = Math.min(height - 1, Math.ceil(((bottom0 + 1) * height) / hh) + band);
  const bw = right - left + 1;
  const bh = bottom - top + 1;

  // Chamfer distances (3 per step across, 4 diagonally) to the nearest keep and remove pixel, capped.
  const cap = 3 * band;
  const toKeep = new Uint8Array(bw * bh).fill(255);
  const toRemove = new Uint8Array(bw * bh).fill(255);
  for (let y = 0; y < bh; y++) {
    const row = hy(top + y) * hw;
    for (let x = 0; x < bw; x++) {
      const c = classes[row + hx[left + x]!];
      if (c === KEEP) toKeep[y * bw + x] = 0;
      else if (c === REMOVE) toRemove[y * bw + x] = 0;
    }
  }
  chamfer(toKeep, bw, bh);
  chamfer(toRemove, bw, bh);

  for (let y = 0; y < bh; y++) {
    for (let x = 0; x < bw; x++) {
      const j = y * bw + x;
      const dk = toKeep[j]!;
      const dr = toRemove[j]!;
      if (dk >= cap && dr >= cap) continue;
      const i = (top + y) * width + left + x;
      if (dk === 0) {
        alpha[i] = 255;
        continue;
      }
      if (dr === 0) {
        alpha[i] = 0;
        continue;
      }
      const wk = dk >= cap ? 0 : 1 - dk / cap;
      const wr = dr >= cap ? 0 : 1 - dr / cap;
      const sum = wk + wr;
      alpha[i] = sum >= 1 ? Math.round((255 * wk) / sum) : Math.round(alpha[i]! * (1 - sum) + 255 * wk);
    }
  }
}

/** Two-pass 3-4 chamfer distance transform, in place: 0 at the seeds, saturating at 255. */
function chamfer(d: Uint8Array, w: number, h: number): void {
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const i = y * w + x;
      let v = d[i]!;
      if (v === 0) continue;
      if (x > 0 && d[i - 1]! + 3 < v) v = d[i - 1]! + 3;
      if (y > 0) {
        const up = i - w;
        if (d[up]! + 3 < v) v = d[up]! + 3;
        if (x > 0 && d[up - 1]! + 4 < v) v = d[up - 1]! + 4;
        if (x < w - 1 && d[up + 1]! + 4 < v) v = d[up + 1]! + 4;
      }
      d[i] = v;
    }
  }
  for (let y = h - 1; y >= 0; y--) {
    for (let x = w - 1; x >= 0; x--) {
      const i = y * w + x;
      let v = d[i]!;
      if (v === 0) continue;
      if (x < w - 1 && d[i + 1]! + 3 < v) v = d[i + 1]! + 3;
      if (y < h - 1) {
        const down = i + w;
        if (d[down]! + 3 < v) v = d[down]! + 3;
        if (x < w - 1 && d[down + 1]! + 4 < v) v = d[down + 1]! + 4;
        if (x > 0 && d[down - 1]! + 4 < v) v = d[down - 1]! + 4;
      }
      d[i] = v;
    }
  }
}
