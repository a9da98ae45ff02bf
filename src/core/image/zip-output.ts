import type { Sharp } from 'sharp';
import { zipStored } from './zip.js';

/**
 * `format=zip`: the RGBA result split by libvips into `color.jpg` (its colour, JPEG 90, 4:4:4) and
 * `alpha.png` (its alpha channel, one grey channel), zipped. Both encodes run at once.
 */
export async function encodeZip(image: Sharp, pngCompressionLevel: number): Promise<Buffer> {
  const [color, alpha] = await Promise.all([
    image.clone().removeAlpha().jpeg({ quality: 90, chromaSubsampling: '4:4:4' }).toBuffer(),
    image.clone().extractChannel(3).toColourspace('b-w').png({ compressionLevel: pngCompressionLevel }).toBuffer(),
  ]);
  return zipStored([
    { name: 'color.jpg', data: color },
    { name: 'alpha.png', data: alpha },
  ]);
}
