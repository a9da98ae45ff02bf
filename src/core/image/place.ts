import sharp, { type Sharp } from 'sharp';
import { marginPixels, type OutputOptions, type Position } from '../output-options.js';
import type { Box } from './output.js';
import { rawGrey } from './raw-grey.js';

/**
 * Where `scale` and `position` put the subject's box on a canvas of `width` x `height`: scaled
 * (aspect kept) to fit `scale` of the canvas's width and height, then placed at `position` — the
 * share of the room left around it (CSS background-position's rule), or, for `original`, keeping
 * its centre where it was (clamped to the canvas). Plain geometry, for the step and its tests.
 */
export function placedBox(box: Box, width: number, height: number, scale: number | null, position: Position): Box {
  const factor = scale === null ? 1 : Math.min((scale * width) / box.width, (scale * height) / box.height);
  const w = Math.max(1, Math.min(width, Math.round(box.width * factor)));
  const h = Math.max(1, Math.min(height, Math.round(box.height * factor)));
  const clamp = (v: number, room: number) => Math.max(0, Math.min(room, Math.round(v)));
  if (position === 'original') {
    return { left: clamp(box.left + (box.width - w) / 2, width - w), top: clamp(box.top + (box.height - h) / 2, height - h), width: w, height: h };
  }
  return { left: clamp(((width - w) * position.x) / 100, width - w), top: clamp(((height - h) * position.y) / 100, height - h), width: w, height: h };
}

/**
 * `scale` / `position`: the subject's box cut out of `image` (raw, `width` x `height`, `channels`),
 * resized to `target`'s size and set at its place on a canvas of the same size filled with `fill`
 * (libvips extract, resize, extend: no per-pixel loop here).
 */
export async function placeSubject(
  image: Sharp,
  width: number,
  height: number,
  channels: 1 | 3 | 4,
  box: Box,
  target: Box,
  fill: { r: number; g: number; b: number; alpha: number },
  /** The canvas `target` is on; default the source's size. */
  canvas: { width: number; height: number } = { width, height },
): Promise<Sharp> {
  // Made raw first: `image` may be a pipeline that joins its alpha channel on the way out, and
  // sharp applies joinChannel after extract/resize/extend, to the unmoved alpha.
  const source = channels === 1 ? await rawGrey(image) : await image.raw().toBuffer();
  let subject = sharp(source, { raw: { width, height, channels } }).extract({ left: box.left, top: box.top, width: box.width, height: box.height });
  if (target.width !== box.width || target.height !== box.height) subject = subject.resize(target.width, target.height, { fit: 'fill' });
  subject = subject.extend({
    left: target.left,
    top: target.top,
    right: canvas.width - target.left - target.width,
    bottom: canvas.height - target.top - target.height,
    background: fill,
  });
  const data = channels === 1 ? await rawGrey(subject) : await subject.raw().toBuffer();
  return sharp(data, { raw: { width: canvas.width, height: canvas.height, channels } });
}

/**
 * `output_size` / `padding`: where a region of `width` x `height` goes on a canvas of
 * `canvasWidth` x `canvasHeight`: the area inside the padding (each side px, or % of the
 * canvas's side along it), the region fitted into it (aspect kept, up or down; times `scale`
 * when given), placed at `position` within it (`original` centres). Plain geometry.
 */
export function paddedPlacement(
  width: number,
  height: number,
  canvasWidth: number,
  canvasHeight: number,
  options: Pick<OutputOptions, 'padding' | 'scale' | 'position'>,
): Box {
  const p = options.padding;
  const left = marginPixels(p.left, canvasWidth);
  const top = marginPixels(p.top, canvasHeight);
  const inner = { width: canvasWidth - left - marginPixels(p.right, canvasWidth), height: canvasHeight - top - marginPixels(p.bottom, canvasHeight) };
  const position = options.position === 'original' ? { x: 50, y: 50 } : options.position;
  const placed = placedBox({ top: 0, left: 0, width, height }, inner.width, inner.height, options.scale ?? 1, position);
  return { left: left + placed.left, top: top + placed.top, width: placed.width, height: placed.height };
}
