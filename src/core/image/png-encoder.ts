import { createRequire } from 'node:module';
import { encodeInBands, MIN_BAND_ROWS } from './png-bands.js';

/**
 * The PNG encoder for RGBA output: @napi-rs/image (the Rust `png` crate) with `Fast` compression
 * (fdeflate) and the Paeth filter. On the smoke photos' cutouts it takes a quarter to a half of
 * the CPU of sharp's zlib at level 2-4 for 0.8-1.04 of the bytes (docs/benchmarks.md, "PNG
 * settings"); the decoded pixels are the same (lossless: test/png-encoder.test.ts).
 *
 * It needs the whole RGBA image in one buffer, so it runs where that buffer is made: in a
 * pixel-pool worker (output.ts), never on the host's event loop (`pngSync` blocks its thread).
 * When the package or its prebuilt binary fails to load (a platform without one), PNGs are
 * encoded by sharp as before; `fastPngEncoderError()` says why. While the host's cores are idle
 * the pool may ask for the PNG in row bands encoded at once (`pngBands`: png-bands.ts).
 */
export type PngEncoderName = 'napi-rs' | 'sharp';

/**
 * Largest image the fast encoder takes. It needs the RGBA whole (4 bytes a pixel) and copies it
 * (4 more), where sharp streams colour and alpha into zlib: 32 MB more per render in flight at
 * this size, 96 MB at 12 MP. Above it sharp encodes, so the API's peak memory with many large
 * uploads (docs/benchmarks.md, memory) is what it was; the CPU target is at 1 MP.
 */
export const FAST_PNG_MAX_PIXELS = 4_000_000;

/** Whether an RGBA PNG of this size goes to the fast encoder under `encoder`. */
export function usesFastPng(encoder: PngEncoderName, width: number, height: number): boolean {
  return encoder === 'napi-rs' && width * height <= FAST_PNG_MAX_PIXELS && fastPngEncoderAvailable();
}

interface NapiImage {
  Transformer: {
    fromRgbaPixels(
      input: Uint8Array,
      width: number,
      height: number,
    ): { pngSync(options?: { compressionType?: number; filterType?: number }): Buffer; png(options?: { compressionType?: number; filterType?: number }): Promise<Buffer> };
  };
  CompressionType: { Fast: number };
  FilterType: { Paeth: number };
}

let napi: NapiImage | null | undefined;
let loadError: unknown;

function load(): NapiImage | null {
  if (napi === undefined) {
    try {
      napi = createRequire(import.meta.url)('@napi-rs/image') as NapiImage;
    } catch (error) {
      loadError = error;
      napi = null;
    }
  }
  return napi;
}

/** Whether the fast encoder loaded (loading it once, in this thread). */
export function fastPngEncoderAvailable(): boolean {
  return load() !== null;
}

/** Why the fast encoder did not load, or undefined. */
export function fastPngEncoderError(): unknown {
  load();
  return loadError;
}

/**
 * `rgba` (width x height x 4) as a PNG by the fast encoder, on this thread; null when it is not
 * available (the caller encodes with sharp).
 */
export function encodePngRgbaFast(rgba: Uint8Array, width: number, height: number): Buffer | null {
  const lib = load();
  if (!lib) return null;
  if (rgba.length !== width * height * 4) throw new RangeError(`RGBA buffer of ${rgba.length} bytes for ${width}x${height}`);
  return lib.Transformer.fromRgbaPixels(rgba, width, height).pngSync({ compressionType: lib.CompressionType.Fast, filterType: lib.FilterType.Paeth });
}

/**
 * A band of a banded encode is at least this many pixels: below it the hand-offs (a libuv
 * thread each, the join) cost more than the band's share of the encode saves.
 */
export const MIN_PNG_BAND_PIXELS = 256 * 1024;
/** Most bands (`pngBands`): a 4 MP image (FAST_PNG_MAX_PIXELS) has 15 of the smallest. */
export const MAX_PNG_BANDS = 16;

/** Bands an RGBA PNG of this size is encoded in, at most `most` (1: whole, on this thread). */
export function pngBandsFor(width: number, height: number, most: number): number {
  return Math.max(1, Math.min(most, Math.floor((width * height) / MIN_PNG_BAND_PIXELS), Math.floor(height / MIN_BAND_ROWS)));
}

/**
 * encodePngRgbaFast in up to `most` row bands at once on libuv's threads (png-bands.ts: the same
 * pixels, a few bytes more per band), whole on this thread when the image is too small for two
 * bands or the bands' streams cannot be joined; with the bands it was encoded in (1: whole).
 * Null when the fast encoder is not available.
 */
export async function encodePngRgbaFastInBands(rgba: Uint8Array, width: number, height: number, most: number): Promise<{ png: Buffer; bands: number } | null> {
  const lib = load();
  if (!lib) return null;
  const bands = pngBandsFor(width, height, most);
  const whole = () => ({ png: encodePngRgbaFast(rgba, width, height)!, bands: 1 });
  if (bands < 2) return whole();
  if (rgba.length !== width * height * 4) throw new RangeError(`RGBA buffer of ${rgba.length} bytes for ${width}x${height}`);
  const options = { compressionType: lib.CompressionType.Fast, filterType: lib.FilterType.Paeth };
  const encoder = {
    encodeAsync: (band: Uint8Array, w: number, h: number) => lib.Transformer.fromRgbaPixels(band, w, h).png(options),
    encodeSync: (band: Uint8Array, w: number, h: number) => lib.Transformer.fromRgbaPixels(band, w, h).pngSync(options),
  };
  const joined = await encodeInBands(encoder, rgba, width, height, bands);
  return joined ? { png: joined, bands } : whole();
}
