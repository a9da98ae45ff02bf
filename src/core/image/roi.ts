import type { Region } from '../output-options.js';

/**
 * `roi`: only the region may be foreground. Clears, in place, the full-size mask outside it:
 * whole rows above and below in one fill each, and the two sides of each row inside it (native
 * fills, no per-pixel loop). Coordinates are the upright image's, px or % of its size, clamped to it.
 */
export function clearOutsideRegion(alpha: Buffer, width: number, height: number, region: Region): void {
  const at = (edge: Region['left'], size: number) => Math.max(0, Math.min(size, Math.round(edge.unit === '%' ? (size * edge.value) / 100 : edge.value)));
  const left = at(region.left, width);
  const right = at(region.right, width);
  const top = at(region.top, height);
  const bottom = at(region.bottom, height);
  if (left >= right || top >= bottom) {
    alpha.fill(0);
    return;
  }
  alpha.fill(0, 0, top * width);
  alpha.fill(0, bottom * width);
  for (let y = top; y < bottom; y++) {
    alpha.fill(0, y * width, y * width + left);
    alpha.fill(0, y * width + right, (y + 1) * width);
  }
}
