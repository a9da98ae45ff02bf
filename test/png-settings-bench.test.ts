import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { measurePngSettings, pngEncoders, REFERENCE, type Cutout } from '../bench/png-settings.js';

/**
 * The png-settings table (bench/png-settings.ts) chooses the shipped PNG default: its
 * `lossless` column must catch an encoder that changes pixels, and its sizes must be the files'.
 */
describe('the png-settings benchmark', () => {
  // A 64 x 48 cutout with more than 256 colours (a gradient), a soft edge and a cleared background.
  const width = 64;
  const height = 48;
  const rgba = Buffer.alloc(width * height * 4);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * 4;
      const a = x < 40 ? 255 : x < 48 ? (48 - x) * 30 : 0;
      if (a > 0) rgba.set([x * 4, y * 5, (x * y) % 256, a], i);
    }
  }
  const cutout: Cutout = { name: 'gradient', rgba, width, height };

  it('marks lossless encoders lossless and the palette (quantised) one not, with the files\' sizes', async () => {
    const all = await pngEncoders();
    const chosen = all.filter((e) => [REFERENCE, 'sharp level 2', 'sharp palette, effort 1'].includes(e.name));
    const rows = await measurePngSettings(cutout, chosen, 1);
    const row = (name: string) => rows.find((r) => r.encoder === name)!;
    expect(row(REFERENCE).lossless).toBe(true);
    expect(row('sharp level 2').lossless).toBe(true);
    expect(row('sharp palette, effort 1').lossless).toBe(false);
    expect(row(REFERENCE).cpuVsLevel4).toBe(1);
    const file = await sharp(rgba, { raw: { width, height, channels: 4 } }).png({ compressionLevel: 2 }).toBuffer();
    expect(row('sharp level 2').bytes).toBe(file.length);
  });

  it('its node:zlib reference writer makes PNGs that decode to the same pixels', async () => {
    const zlibRows = (await pngEncoders()).filter((e) => e.name.startsWith('node:zlib'));
    expect(zlibRows.length).toBeGreaterThan(0);
    for (const encoder of zlibRows) {
      const { data, info } = await sharp(await encoder.encode(rgba, width, height)).raw().toBuffer({ resolveWithObject: true });
      expect(info.channels).toBe(4);
      expect(data.equals(rgba)).toBe(true);
    }
  });
});
