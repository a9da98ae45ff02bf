import { segmentAtQuality } from '../../src/core/image/multi-pass.js';
import { probeImage, type MaskModel } from '../../src/core/image/pipeline.js';
import type { PixelPool } from '../../src/core/image/pixel-pool.js';
import { ISNET_PROFILE } from '../../src/core/index.js';

/**
 * A stand-in model for tests of what crosses between threads, not of segmentation: a soft-edged
 * disc (a band of partial alpha around it, so foreground estimation has soft pixels to work on)
 * at the size asked for, whatever the input.
 */
export const softDiscModel: MaskModel = async (_input, _signal, size) => {
  const width = size?.width ?? ISNET_PROFILE.width;
  const height = size?.height ?? ISNET_PROFILE.height;
  const mask = new Uint8Array(width * height);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) mask[y * width + x] = Math.max(0, Math.min(255, Math.round(128 - (Math.hypot(x - width / 2, y - height / 2) - width / 4) * 4)));
  }
  return { mask };
};

/** The render settings of the tests that render a soft-disc segmentation: level 4 PNG, foreground estimation on. */
export const DISC_RENDER = { pngCompressionLevel: 4, maxOutputPixels: Infinity, foregroundEstimation: true };

/** `photo` segmented at `balanced` by the soft disc, its full-size work done in `pool`. */
export async function segmentWithSoftDisc(photo: Buffer, pool: PixelPool) {
  const limits = { maxInputPixels: 50_000_000 };
  return segmentAtQuality('balanced', photo, await probeImage(photo, limits), ISNET_PROFILE, softDiscModel, limits, AbortSignal.timeout(120_000), pool);
}
