import sharp, { type Sharp } from 'sharp';

/**
 * A one-channel pipeline's pixels, one byte each. libvips may widen a grey image to three bands
 * on the way (`extend` with a background colour does), and an extractChannel in the same pipeline
 * runs before that: the first band is taken in a second pass when it did.
 */
export async function rawGrey(image: Sharp): Promise<Buffer> {
  const { data, info } = await image.raw().toBuffer({ resolveWithObject: true });
  if (info.channels === 1) return data;
  return sharp(data, { raw: { width: info.width, height: info.height, channels: info.channels } }).extractChannel(0).raw().toBuffer();
}
