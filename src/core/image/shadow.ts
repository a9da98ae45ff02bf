import sharp, { type Sharp } from 'sharp';
import type { Shadow } from '../output-options.js';
import type { Box } from './output.js';
import { rawGrey } from './raw-grey.js';

/** The shadow's blur (Gaussian sigma) and its downward offset, as shares of the subject's box height. */
export const SHADOW_BLUR = 0.02;
export const SHADOW_OFFSET = 0.015;

/**
 * `add_shadow`: a soft drop shadow made from the cutout's own alpha — shifted down by
 * SHADOW_OFFSET of the subject's height, blurred by SHADOW_BLUR of it, scaled by the opacity,
 * black — with the cutout put over it. `image` is RGBA (`width` x `height`, transparent
 * background); the result is RGBA of the same size. All libvips (extract, extend, blur, linear,
 * composite): deterministic, no per-pixel loop here.
 */
export async function addShadow(image: Sharp, width: number, height: number, subject: Box, shadow: Shadow): Promise<Sharp> {
  const cutout = await image.raw().toBuffer();
  const raw4 = { raw: { width, height, channels: 4 as const } };
  const offset = Math.min(height - 1, Math.round(SHADOW_OFFSET * subject.height));
  const sigma = Math.max(0.5, SHADOW_BLUR * subject.height);
  // The alpha (one extractChannel per pipeline: a second one replaces the first), then shifted down.
  const raw1 = { raw: { width, height, channels: 1 as const } };
  let alpha = sharp(await sharp(cutout, raw4).extractChannel(3).raw().toBuffer(), raw1);
  if (offset > 0) alpha = sharp(await rawGrey(alpha.extract({ left: 0, top: 0, width, height: height - offset }).extend({ top: offset, background: { r: 0, g: 0, b: 0, alpha: 1 } })), raw1);
  const shadowAlpha = await rawGrey(alpha.blur(sigma).linear(shadow.opacity, 0));
  const layer = await sharp({ create: { width, height, channels: 3, background: { r: 0, g: 0, b: 0 } } })
    .joinChannel(shadowAlpha, { raw: { width, height, channels: 1 } })
    .raw()
    .toBuffer();
  const composed = await sharp(layer, raw4).composite([{ input: cutout, ...raw4 }]).raw().toBuffer();
  return sharp(composed, raw4);
}
