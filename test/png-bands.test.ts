import sharp from 'sharp';
import { inflateSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { ISNET_PROFILE } from '../src/core/image/profile.js';
import { renderOutput } from '../src/core/image/output.js';
import { probeImage, segment } from '../src/core/image/pipeline.js';
import { PixelPool } from '../src/core/image/pixel-pool.js';
import { adler32Combine, adler32FirstByteChanged, bandRows, encodeInBands, joinBands } from '../src/core/image/png-bands.js';
import { encodePngRgbaFast, encodePngRgbaFastInBands, pngBandsFor } from '../src/core/image/png-encoder.js';
import { DEFAULT_OUTPUT } from '../src/core/output-options.js';
import { softDiscModel } from './helpers/disc-model.js';
import { objectOnTexture } from './helpers/synthetic-image.js';
import { createRequire } from 'node:module';

/**
 * The PNG encode in row bands (png-bands.ts): the joined file is a valid PNG (libvips decodes it,
 * zlib inflates its stream with the Adler-32 checked) whose pixels are exactly the RGBA given,
 * and whose rows, unfiltered by the reference below, are that RGBA too. What could go wrong is in
 * the join (the first row's filter byte, the final bits, the sync flushes, the checksums), so the
 * images are large enough for every band count tried to be joined, not encoded whole.
 */
const napi = createRequire(import.meta.url)('@napi-rs/image') as {
  Transformer: { fromRgbaPixels(input: Uint8Array, width: number, height: number): { png(options: object): Promise<Buffer>; pngSync(options: object): Buffer } };
};
const FAST_PAETH = { compressionType: 1, filterType: 4 };
const encoder = {
  encodeAsync: (rgba: Uint8Array, w: number, h: number) => napi.Transformer.fromRgbaPixels(rgba, w, h).png(FAST_PAETH),
  encodeSync: (rgba: Uint8Array, w: number, h: number) => napi.Transformer.fromRgbaPixels(rgba, w, h).pngSync(FAST_PAETH),
};

/** A cutout-like RGBA: a transparent margin, soft edges, noise, gradients and flat runs. */
function cutoutLike(width: number, height: number): Buffer {
  const rgba = Buffer.alloc(width * height * 4);
  let seed = 987654321;
  const random = () => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 16) & 0xff;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * 4;
      const d = Math.hypot(x - width / 2, y - height / 2) - Math.min(width, height) * 0.4;
      const a = Math.max(0, Math.min(255, Math.round(128 - d * 8)));
      if (a === 0) continue; // the API clears the colour of transparent pixels
      rgba[i] = y % 97 < 40 ? random() : (x * 3) & 0xff;
      rgba[i + 1] = (y + (x >> 3)) & 0xff;
      rgba[i + 2] = x % 50 < 25 ? 200 : random() >> 2;
      rgba[i + 3] = a;
    }
  }
  return rgba;
}

function idat(png: Buffer): Buffer {
  const parts: Buffer[] = [];
  for (let at = 8; at < png.length; ) {
    const length = png.readUInt32BE(at);
    if (png.toString('latin1', at + 4, at + 8) === 'IDAT') parts.push(png.subarray(at + 8, at + 8 + length));
    at += 12 + length;
  }
  return Buffer.concat(parts);
}

/** The PNG specification's unfiltering, written out here (RGBA, 8 bits): the reference. */
function unfilter(filtered: Buffer, width: number, height: number): { rgba: Buffer; filters: number[] } {
  const stride = width * 4;
  const rgba = Buffer.alloc(stride * height);
  const filters: number[] = [];
  for (let y = 0; y < height; y++) {
    const type = filtered[y * (stride + 1)]!;
    filters.push(type);
    for (let i = 0; i < stride; i++) {
      const x = filtered[y * (stride + 1) + 1 + i]!;
      const a = i >= 4 ? rgba[y * stride + i - 4]! : 0;
      const b = y > 0 ? rgba[(y - 1) * stride + i]! : 0;
      const c = i >= 4 && y > 0 ? rgba[(y - 1) * stride + i - 4]! : 0;
      const p = a + b - c;
      const paeth = Math.abs(p - a) <= Math.abs(p - b) && Math.abs(p - a) <= Math.abs(p - c) ? a : Math.abs(p - b) <= Math.abs(p - c) ? b : c;
      const predicted = [0, a, b, (a + b) >> 1, paeth][type];
      if (predicted === undefined) throw new Error(`filter type ${type}`);
      rgba[y * stride + i] = (x + predicted) & 0xff;
    }
  }
  return { rgba, filters };
}

function adler32(bytes: Uint8Array): number {
  let a = 1;
  let b = 0;
  for (const byte of bytes) {
    a = (a + byte) % 65521;
    b = (b + a) % 65521;
  }
  return ((b << 16) | a) >>> 0;
}

const pools: PixelPool[] = [];
afterAll(() => Promise.all(pools.map((p) => p.close())));

describe('the PNG encode in row bands', () => {
  const width = 1100;
  const height = 960;
  const rgba = cutoutLike(width, height);

  it.each([2, 3, 4, 7])('joins %i bands into one PNG of exactly the RGBA given', async (bands) => {
    const before = Buffer.from(rgba);
    const png = await encodeInBands(encoder, rgba, width, height, bands);
    expect(png).not.toBeNull(); // joined, not left to the whole encode
    expect(rgba.equals(before)).toBe(true);
    // libvips (libspng / libpng) decodes it: chunk CRCs, the zlib stream, the pixels.
    const { data, info } = await sharp(png!).raw().toBuffer({ resolveWithObject: true });
    expect([info.width, info.height, info.channels]).toEqual([width, height, 4]);
    expect(data.equals(rgba)).toBe(true);
    // zlib inflates the stream (it checks the Adler-32) to rows that unfilter to the RGBA.
    const filtered = inflateSync(idat(png!));
    expect(filtered.length).toBe(height * (width * 4 + 1));
    const { rgba: unfiltered, filters } = unfilter(filtered, width, height);
    expect(unfiltered.equals(rgba)).toBe(true);
    // Each band after the first starts with a Sub row; the rest are Paeth, as the whole encode.
    const starts = new Set(bandRows(height, bands).map(([start]) => start).filter((s) => s > 0));
    expect(filters.map((f, y) => (starts.has(y) ? f === 1 : f === 4)).every(Boolean)).toBe(true);
    // A few bytes per band more than the whole encode.
    const whole = encodePngRgbaFast(rgba, width, height)!;
    expect(png!.length).toBeGreaterThan(whole.length);
    expect(png!.length).toBeLessThan(whole.length * 1.01);
  });

  it('leaves an image the encoder stores uncompressed to the whole encode (same pixels)', async () => {
    // Noise everywhere: fdeflate's output is larger than stored blocks, so the png crate stores the band.
    const w = 800;
    const h = 700;
    const noise = Buffer.alloc(w * h * 4);
    let seed = 42;
    for (let i = 0; i < noise.length; i++) noise[i] = ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 16) & 0xff;
    expect(await encodeInBands(encoder, noise, w, h, 2)).toBeNull();
    const result = await encodePngRgbaFastInBands(noise, w, h, 2);
    expect(result!.bands).toBe(1);
    expect((await sharp(result!.png).raw().toBuffer()).equals(noise)).toBe(true);
  });

  it('answers null for a stream that is not fdeflate\'s', async () => {
    const rows = bandRows(height, 2);
    const pngs = await Promise.all(rows.map(([s, e]) => encoder.encodeAsync(rgba.subarray(s * width * 4, e * width * 4), width, e - s)));
    const broken = Buffer.from(pngs[1]!);
    const at = broken.indexOf('IDAT', 0, 'latin1') + 4;
    broken[at + 2] = 0xec; // the first block's header byte
    expect(joinBands([pngs[0]!, broken], rows, width * 4)).toBeNull();
  });

  it('combines Adler-32s as zlib does, and adjusts one for a changed first byte', () => {
    const a = Buffer.from(cutoutLike(300, 7));
    const b = Buffer.from(cutoutLike(200, 11));
    expect(adler32Combine(adler32(a), adler32(b), b.length)).toBe(adler32(Buffer.concat([a, b])));
    const changed = Buffer.from(b);
    changed[0] = (changed[0]! + 253) & 0xff;
    expect(adler32FirstByteChanged(adler32(b), b.length, changed[0]! - b[0]!)).toBe(adler32(changed));
  });

  it('splits only images with bands of at least 256 Ki pixels', () => {
    expect(pngBandsFor(1224, 816, 4)).toBe(3);
    expect(pngBandsFor(1000, 667, 4)).toBe(2);
    expect(pngBandsFor(600, 400, 4)).toBe(1);
    expect(pngBandsFor(2449, 1633, 16)).toBe(15);
    expect(pngBandsFor(1224, 816, 1)).toBe(1);
  });

  it('is what the pool\'s render encodes with while cores are idle, and not when none are', async () => {
    const image = await objectOnTexture(1100, 800);
    const limits = { maxInputPixels: 50_000_000 };
    const render = async (pool: PixelPool) => {
      const probe = await probeImage(image.bytes, limits);
      const seg = await segment(image.bytes, probe, ISNET_PROFILE, softDiscModel, limits, AbortSignal.timeout(30_000), true);
      return renderOutput(seg, { ...DEFAULT_OUTPUT, format: 'png' }, { pngCompressionLevel: 2, pngEncoder: 'napi-rs', maxOutputPixels: Infinity, foregroundEstimation: true }, pool);
    };
    const make = (pngBands: number, idle: number) => {
      const pool = new PixelPool({ threads: 1, pngBands, idleCores: () => idle });
      pools.push(pool);
      return pool;
    };
    const whole = await render(make(1, 16));
    const bandedPool = make(3, 16);
    const banded = await render(bandedPool);
    const busyPool = make(3, 0);
    const busy = await render(busyPool);
    const a = await sharp(whole.body).raw().toBuffer();
    const b = await sharp(banded.body).raw().toBuffer();
    expect(b.equals(a)).toBe(true);
    expect(banded.body.equals(whole.body)).toBe(false); // it was encoded in bands
    expect(busy.body.equals(whole.body)).toBe(true); // no idle core: whole, as before
    // What bgcut_png_encodes_total counts: 1100x800 is 880 Ki pixels, three bands of at least 256 Ki.
    expect([banded.pngBands, busy.pngBands]).toEqual([3, 1]);
    expect([bandedPool.pngsInBands, bandedPool.pngsWhole, busyPool.pngsInBands, busyPool.pngsWhole]).toEqual([1, 0, 0, 1]);
  });
});
