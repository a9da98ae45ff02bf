/**
 * The `png-settings` section of `npm run bench`: CPU time and file size of PNG encoders and
 * their settings on the cutouts bgcut makes (RGBA, colour of fully transparent pixels cleared,
 * as output.ts makes them), to choose the shipped default from.
 *
 * Each row encodes the same RGBA pixels; CPU is process.cpuUsage() around the awaited encode
 * (user + system of every thread of this process, so libvips's and libuv's threads count), the
 * median of `runs` after one unmeasured. Every output is decoded again (sharp) and compared with
 * the input: `lossless` says whether every pixel came back. `main thread` says whether the
 * encoder runs on the caller's thread (a host app's event loop) or off it.
 *
 * Encoders: sharp (libvips's PNG saver: zlib level, adaptive row filtering, palette with
 * `effort`), and, when installed (they are not dependencies: `npm i --no-save NAME` to add them
 * to the table), other PNG encoders on npm: @napi-rs/image (Rust `png` crate, native, async),
 * @jsquash/png (the same crate in WebAssembly), fast-png and pngjs (JavaScript). zlib's strategy
 * is not an option of sharp's; the `node:zlib` rows reach it through a minimal PNG writer kept
 * here (filter None on every row, as sharp's default), for the table only.
 */
import { createRequire } from 'node:module';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import sharp, { type PngOptions } from 'sharp';

export interface Cutout {
  name: string;
  /** RGBA, 8 bits, the colour of alpha-0 pixels cleared. */
  rgba: Buffer;
  width: number;
  height: number;
}

export interface PngEncoder {
  name: string;
  /** Runs on the caller's thread (blocks an event loop for its whole time). */
  mainThread: boolean;
  encode(rgba: Buffer, width: number, height: number): Promise<Buffer>;
}

export interface PngSettingsRow {
  image: string;
  encoder: string;
  cpuMs: number;
  wallMs: number;
  bytes: number;
  /** CPU and bytes against sharp at the level shipped before this table (4). */
  cpuVsLevel4: number;
  bytesVsLevel4: number;
  lossless: boolean;
  mainThread: boolean;
}

/** The row each other row is compared with: the default PNG setting before this table. */
export const REFERENCE = 'sharp level 4';

const sharpPng = (name: string, options: PngOptions): PngEncoder => ({
  name,
  mainThread: false,
  encode: (rgba, width, height) => sharp(rgba, { raw: { width, height, channels: 4 } }).png(options).toBuffer(),
});

const deflate = promisify(zlib.deflate);
const CRC_TABLE = new Int32Array(256).map((_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c;
});
function crc32(bytes: Buffer): number {
  let c = -1;
  for (let i = 0; i < bytes.length; i++) c = CRC_TABLE[(c ^ bytes[i]!) & 0xff]! ^ (c >>> 8);
  return (c ^ -1) >>> 0;
}
function chunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
  return Buffer.concat([head, data, crc]);
}
/** An RGBA PNG, filter None, deflated by node:zlib (libuv's pool) with the given level and strategy. */
const nodeZlib = (name: string, level: number, strategy: number): PngEncoder => ({
  name,
  mainThread: false,
  encode: async (rgba, width, height) => {
    const stride = width * 4;
    const rows = Buffer.allocUnsafe((stride + 1) * height);
    for (let y = 0; y < height; y++) {
      rows[y * (stride + 1)] = 0;
      rgba.copy(rows, y * (stride + 1) + 1, y * stride, (y + 1) * stride);
    }
    const ihdr = Buffer.alloc(13);
    ihdr.writeUInt32BE(width, 0);
    ihdr.writeUInt32BE(height, 4);
    ihdr[8] = 8;
    ihdr[9] = 6;
    const idat = await deflate(rows, { level, strategy });
    return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', ihdr), chunk('IDAT', idat), chunk('IEND', Buffer.alloc(0))]);
  },
});

/** An optional package, or undefined when it is not installed. */
async function optional(name: string): Promise<any> {
  try {
    return await import(name);
  } catch {
    return undefined;
  }
}

/** Every encoder of the table: sharp's settings, node:zlib strategies, and the npm encoders installed. */
export async function pngEncoders(): Promise<PngEncoder[]> {
  const encoders: PngEncoder[] = [];
  for (const level of [0, 1, 2, 3, 4, 6, 9]) encoders.push(sharpPng(`sharp level ${level}`, { compressionLevel: level }));
  for (const level of [1, 2, 4, 6]) encoders.push(sharpPng(`sharp level ${level}, adaptiveFiltering`, { compressionLevel: level, adaptiveFiltering: true }));
  // Palette: quantised to at most 256 colours (libimagequant): lossless only for images that have
  // no more; `effort` is the quantiser's.
  encoders.push(sharpPng('sharp palette, effort 1', { palette: true, effort: 1, compressionLevel: 4 }));
  encoders.push(sharpPng('sharp palette, effort 7 (its default)', { palette: true, compressionLevel: 4 }));
  encoders.push(nodeZlib('node:zlib level 1, default strategy', 1, zlib.constants.Z_DEFAULT_STRATEGY));
  encoders.push(nodeZlib('node:zlib level 4, Z_RLE', 4, zlib.constants.Z_RLE));
  encoders.push(nodeZlib('node:zlib level 4, Z_FILTERED', 4, zlib.constants.Z_FILTERED));
  encoders.push(nodeZlib('node:zlib level 4, default strategy', 4, zlib.constants.Z_DEFAULT_STRATEGY));

  const napi = await optional('@napi-rs/image');
  if (napi) {
    const { Transformer, CompressionType, FilterType } = napi.default ?? napi;
    const settings: [string, number, string, number][] = [
      ['Fast', CompressionType.Fast, 'NoFilter', FilterType.NoFilter],
      ['Fast', CompressionType.Fast, 'Sub', FilterType.Sub],
      ['Fast', CompressionType.Fast, 'Up', FilterType.Up],
      ['Fast', CompressionType.Fast, 'Paeth', FilterType.Paeth],
      ['Default', CompressionType.Default, 'NoFilter', FilterType.NoFilter],
      ['Default', CompressionType.Default, 'Paeth', FilterType.Paeth],
    ];
    for (const [label, compressionType, filterLabel, filterType] of settings) {
      encoders.push({
        name: `@napi-rs/image ${label}, ${filterLabel}`,
        mainThread: false,
        encode: (rgba, width, height) => Transformer.fromRgbaPixels(rgba, width, height).png({ compressionType, filterType }),
      });
    }
  }
  const jsquash = await optional('@jsquash/png/encode.js');
  if (jsquash) {
    const require = createRequire(import.meta.url);
    const { readFile } = await import('node:fs/promises');
    const wasm = await readFile(require.resolve('@jsquash/png/codec/pkg/squoosh_png_bg.wasm'));
    await jsquash.init(wasm);
    encoders.push({
      name: '@jsquash/png (WebAssembly)',
      mainThread: true,
      encode: async (rgba, width, height) =>
        Buffer.from(await jsquash.default({ data: new Uint8ClampedArray(rgba.buffer, rgba.byteOffset, rgba.length), width, height, colorSpace: 'srgb' })),
    });
  }
  const fastPng = await optional('fast-png');
  if (fastPng) {
    encoders.push({
      name: 'fast-png (JavaScript, pako level 1)',
      mainThread: true,
      encode: async (rgba, width, height) => Buffer.from(fastPng.encode({ width, height, data: rgba, channels: 4, depth: 8 }, { zlib: { level: 1 } })),
    });
  }
  const pngjs = await optional('pngjs');
  if (pngjs) {
    const { PNG } = pngjs.default ?? pngjs;
    encoders.push({
      name: 'pngjs (JavaScript filters, zlib level 1, Z_RLE)',
      mainThread: true,
      encode: async (rgba, width, height) => PNG.sync.write({ width, height, data: rgba }, { deflateLevel: 1, deflateStrategy: zlib.constants.Z_RLE, filterType: 0 }),
    });
  }
  return encoders;
}

const cpuNow = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const round = (x: number) => Math.round(x * 10) / 10;

/** True when the PNG decodes to exactly `rgba`. */
async function decodesTo(png: Buffer, cutout: Cutout): Promise<boolean> {
  const { data, info } = await sharp(png).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
  return info.width === cutout.width && info.height === cutout.height && info.channels === 4 && data.equals(cutout.rgba);
}

/** One row per encoder for one cutout. */
export async function measurePngSettings(cutout: Cutout, encoders: PngEncoder[], runs: number): Promise<PngSettingsRow[]> {
  const measured: Omit<PngSettingsRow, 'cpuVsLevel4' | 'bytesVsLevel4'>[] = [];
  for (const encoder of encoders) {
    const first = await encoder.encode(cutout.rgba, cutout.width, cutout.height);
    const cpu: number[] = [];
    const wall: number[] = [];
    for (let i = 0; i < runs; i++) {
      const before = cpuNow();
      const started = performance.now();
      await encoder.encode(cutout.rgba, cutout.width, cutout.height);
      wall.push(performance.now() - started);
      cpu.push(cpuNow() - before);
    }
    measured.push({
      image: cutout.name,
      encoder: encoder.name,
      cpuMs: round(median(cpu)),
      wallMs: round(median(wall)),
      bytes: first.length,
      lossless: await decodesTo(first, cutout),
      mainThread: encoder.mainThread,
    });
  }
  const reference = measured.find((r) => r.encoder === REFERENCE)!;
  return measured.map((r) => ({
    ...r,
    cpuVsLevel4: Math.round((r.cpuMs / reference.cpuMs) * 100) / 100,
    bytesVsLevel4: Math.round((r.bytes / reference.bytes) * 100) / 100,
  }));
}

export function printPngSettings(rows: PngSettingsRow[]): void {
  console.log('| image | encoder | CPU ms | wall ms | bytes | CPU / level 4 | bytes / level 4 | lossless | on main thread |\n|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    console.log(`| ${r.image} | ${r.encoder} | ${r.cpuMs} | ${r.wallMs} | ${r.bytes} | ${r.cpuVsLevel4} | ${r.bytesVsLevel4} | ${r.lossless ? 'yes' : '**no**'} | ${r.mainThread ? 'yes' : 'no'} |`);
  }
}
