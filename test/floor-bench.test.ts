import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { encodeVariant, FLOOR_VARIANTS } from '../bench/floor.js';

/**
 * The floor (bench/floor.ts) must encode what the API sends back, or its ratio compares the API
 * with a different, cheaper file: PNG and WebP cutouts carry the alpha, a JPEG on a colour has
 * none (the alpha is flattened over the colour).
 */
describe('the floor benchmark encodes the API\'s output', () => {
  const width = 40;
  const height = 30;
  const rgb = Buffer.alloc(width * height * 3, 90);
  const alpha = Buffer.alloc(width * height);
  for (let i = 0; i < alpha.length; i++) alpha[i] = i % width < 20 ? 255 : 0;
  const variant = (name: string) => FLOOR_VARIANTS.find((v) => v.name === name)!;

  for (const name of ['png', 'webp']) {
    it(`${name}: a cutout with the mask as its alpha, from raw pixels and from a JPEG`, async () => {
      const jpeg = await sharp(rgb, { raw: { width, height, channels: 3 } }).jpeg().toBuffer();
      for (const source of [sharp(rgb, { raw: { width, height, channels: 3 } }), sharp(jpeg)]) {
        const { data, info } = await sharp(await encodeVariant(source, alpha, width, height, variant(name))).raw().toBuffer({ resolveWithObject: true });
        expect(info.channels).toBe(4);
        expect(data[3]).toBe(255);
        expect(data[(width - 1) * 4 + 3]).toBe(0);
      }
    });
  }

  it('jpg on colour: opaque, the colour where the mask is clear', async () => {
    const out = await encodeVariant(sharp(rgb, { raw: { width, height, channels: 3 } }), alpha, width, height, variant('jpg on colour'));
    const { data, info } = await sharp(out).raw().toBuffer({ resolveWithObject: true });
    expect(info.channels).toBe(3);
    // #1e90ff on the right, the photo's grey on the left (JPEG: within a few levels).
    const right = (width - 1) * 3;
    expect(Math.abs(data[right]! - 0x1e)).toBeLessThan(8);
    expect(Math.abs(data[right + 2]! - 0xff)).toBeLessThan(8);
    expect(Math.abs(data[0]! - 90)).toBeLessThan(8);
  });
});
