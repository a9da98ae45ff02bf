import { crc32 } from 'node:zlib';

/**
 * One RGBA PNG encoded in row bands at once (pigz's way): each band is encoded by the fast encoder
 * (png-encoder.ts: @napi-rs/image, the `png` crate with fdeflate and the Paeth filter) as a PNG of
 * its own, the first on the calling thread (`pngSync`) and the others meanwhile on libuv's
 * threads (the encoder's async `png()`), and the bands' zlib streams are joined into one. The
 * joined file decodes to the same pixels as the whole image's encode; it is a few bytes longer
 * (a block header and an empty stored block per band: ~60 bytes).
 *
 * Why it can be joined without recompressing anything:
 * - **The band's first row.** A band encoded alone filters its first row against a row of zeros,
 *   where Paeth predicts each byte from its left neighbour only: the bytes are that row's Sub
 *   residuals, under Paeth's filter-type byte (4). Sub's byte (1) makes them decode to the row
 *   whatever the row above, so that byte is rewritten. It is the block's first symbol, fdeflate's
 *   5-bit code for 4 right after its fixed 413-bit block header; the code for 1 is 3 bits. So the
 *   header and that symbol are replaced by `SUB_PREFIX`: the same code table written 10 bits
 *   longer (some repeats spelt out; found by a search over the header's encodings), then the code
 *   for 1, which ends 8 bits later than the code for 4 did: the rest of the band's block follows
 *   byte for byte, one byte further on (`joinBands`). The band's other rows are filtered
 *   against their real row above, as in the whole image's encode.
 * - **The deflate block.** fdeflate writes one dynamic block with its own fixed code and the final
 *   bit set (zlib header 78 01, then 0xED), ends it with the end-of-block code and pads with zero
 *   bits to a byte. A band that is not the last gets the final bit cleared, and after its padding an
 *   empty stored block (a sync flush: three zero bits, pad, 00 00 FF FF) so that the next band's
 *   block starts on a byte, as its own stream did. The padding's length is known because the
 *   end-of-block code's last bit is a one: the zeros above the last byte's highest one.
 * - **The checksums.** The zlib stream's Adler-32 is the bands' combined (adler32Combine); the
 *   IDAT chunk's CRC-32 is computed over the joined bytes (zlib's native crc32).
 *
 * Anything else from the encoder (a band stored uncompressed, which the `png` crate does when
 * fdeflate's output would be larger, another header, another code, another end) makes
 * `joinBands` answer null, and the caller encodes the image whole. This relies on fdeflate 0.3's
 * fixed code (the version @napi-rs/image 1.15 is built with): test/png-bands.test.ts decodes the
 * joined files, so an encoder that changes it fails there, not in production (it falls back).
 */

/** A band is at least this many rows (and the split is only worth it on large images: png-encoder.ts). */
export const MIN_BAND_ROWS = 16;

/** fdeflate's zlib header and first block header byte (final bit set, dynamic Huffman). */
const STREAM_START = [0x78, 0x01, 0xed];
/** fdeflate's end-of-block code as written (first bit lowest): 12 bits, the last one written a one. */
const EOB_BITS = 0b100011111111;
const EOB_LENGTH = 12;
/** Where the first symbol starts, in bits from the block's start: after fdeflate's 413-bit block header. */
const FIRST_SYMBOL_BIT = 413;
/** fdeflate's code for the literal 4 (Paeth's filter byte), as written (first bit lowest): 5 bits. */
const LITERAL_4 = 0b10101;
/**
 * A block header for fdeflate's code 10 bits longer than fdeflate's (423 bits: final bit, dynamic,
 * HLIT 286, HDIST 1, the same 18 code-length codes, the same lengths with some repeats spelt out),
 * then the code for the literal 1 (3 bits): 426 bits, of which the last byte holds 2.
 */
const SUB_PREFIX = Uint8Array.from([
  237, 192, 3, 160, 36, 89, 150, 198, 241, 255, 119, 238, 141, 200, 204, 167, 114, 131, 67, 239, 174, 109, 219, 182, 109, 219, 182, 109, 219, 182, 109,
  15, 220, 211, 221, 46, 189, 122, 202, 204, 136, 184, 231, 219, 221, 170, 233, 153, 30, 238, 172, 92, 63, 1,
]);
/** Bytes of SUB_PREFIX before the one it shares with the band's block (whose bits 418.. move 8 bits on). */
const SUB_PREFIX_WHOLE_BYTES = 53;

/** The rows [start, end) of each of `bands` bands of `height` rows, as even as whole rows allow. */
export function bandRows(height: number, bands: number): Array<[number, number]> {
  const rows: Array<[number, number]> = [];
  for (let k = 0; k < bands; k++) rows.push([Math.floor((k * height) / bands), Math.floor(((k + 1) * height) / bands)]);
  return rows;
}

/** zlib's adler32_combine: the Adler-32 of A followed by B, from A's, B's and B's length. */
export function adler32Combine(adler1: number, adler2: number, length2: number): number {
  const BASE = 65521;
  const rem = length2 % BASE;
  let sum1 = adler1 & 0xffff;
  let sum2 = (rem * sum1) % BASE;
  sum1 += (adler2 & 0xffff) + BASE - 1;
  sum2 += ((adler1 >>> 16) & 0xffff) + ((adler2 >>> 16) & 0xffff) + BASE - rem;
  if (sum1 >= BASE) sum1 -= BASE;
  if (sum1 >= BASE) sum1 -= BASE;
  if (sum2 >= 2 * BASE) sum2 -= 2 * BASE;
  if (sum2 >= BASE) sum2 -= BASE;
  return ((sum2 << 16) | sum1) >>> 0;
}

/**
 * The Adler-32 of `length` bytes whose first byte changed by `delta`: that byte is in the first
 * sum once and in the second `length` times.
 */
export function adler32FirstByteChanged(adler: number, length: number, delta: number): number {
  const BASE = 65521;
  const mod = (n: number) => ((n % BASE) + BASE) % BASE;
  const sum1 = mod((adler & 0xffff) + delta);
  const sum2 = mod(((adler >>> 16) & 0xffff) + mod(delta * (length % BASE)));
  return ((sum2 << 16) | sum1) >>> 0;
}

interface Chunks {
  ihdr: Buffer;
  /** The IDAT chunks' data, joined (one chunk: a view, no copy). */
  zlib: Buffer;
}

function chunksOf(png: Buffer): Chunks | null {
  let ihdr: Buffer | null = null;
  const idat: Buffer[] = [];
  for (let at = 8; at + 12 <= png.length; ) {
    const length = png.readUInt32BE(at);
    const type = png.toString('latin1', at + 4, at + 8);
    if (type === 'IHDR') ihdr = png.subarray(at + 8, at + 8 + length);
    else if (type === 'IDAT') idat.push(png.subarray(at + 8, at + 8 + length));
    at += 12 + length;
  }
  if (!ihdr || idat.length === 0) return null;
  return { ihdr, zlib: idat.length === 1 ? idat[0]! : Buffer.concat(idat) };
}

/**
 * The bits of a band's deflate block, from its block header up to and including the end-of-block
 * code (`zlib` less its 2-byte header and 4-byte Adler-32), or null when its end is not
 * fdeflate's: the padding after the code is the zeros above the last byte's highest one, because
 * the code's last bit is a one.
 */
function blockBits(zlib: Buffer): { body: Buffer; bits: number } | null {
  const end = zlib.length - 4;
  const last = zlib[end - 1]!;
  if (last === 0) return null;
  const padding = Math.clz32(last) - 24;
  // Bit i of byte j is the stream's bit 8j + i: the three bytes as a little-endian number.
  const bits = zlib[end - 3]! | (zlib[end - 2]! << 8) | (last << 16);
  if (((bits >>> (24 - padding - EOB_LENGTH)) & ((1 << EOB_LENGTH) - 1)) !== EOB_BITS) return null;
  const body = zlib.subarray(2, end);
  return { body, bits: body.length * 8 - padding };
}

function chunk(type: string, data: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, 'latin1');
  out.set(data, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)), 8 + data.length);
  return out;
}

const SIGNATURE = Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const IEND = chunk('IEND', new Uint8Array(0));
/** An empty stored block's length fields, after its 3 header bits and the padding to a byte. */
const SYNC = Uint8Array.from([0x00, 0x00, 0xff, 0xff]);

/** A band's block as it goes into the joined stream. */
interface BandBlock {
  body: Buffer;
  /** Bytes it takes in the joined stream (with SUB_PREFIX: one more), before the sync flush. */
  bytes: number;
  /** Its bits up to the end of its end-of-block code, there. */
  bits: number;
  /** Written with SUB_PREFIX in place of its header and first symbol. */
  subFirst: boolean;
}

/**
 * The PNG of the whole image from its bands' PNGs (each made by the fast encoder from the band's
 * rows alone), `rowBytes` = width x 4: one IHDR with the whole height, one IDAT with the joined
 * stream, IEND, written into one buffer. Null when a band's stream is not the shape this relies on.
 */
export function joinBands(pngs: Buffer[], rows: Array<[number, number]>, rowBytes: number): Buffer | null {
  const blocks: BandBlock[] = [];
  let ihdr: Buffer | null = null;
  let adler = 1;
  let zlibLength = 2 + 4;
  for (let k = 0; k < pngs.length; k++) {
    const chunks = chunksOf(pngs[k]!);
    if (!chunks) return null;
    const { zlib } = chunks;
    ihdr ??= chunks.ihdr;
    if (zlib.length < 64 || zlib[0] !== STREAM_START[0] || zlib[1] !== STREAM_START[1] || zlib[2] !== STREAM_START[2]) return null;
    const block = blockBits(zlib);
    if (!block) return null;
    const subFirst = k > 0;
    if (subFirst) {
      const at = FIRST_SYMBOL_BIT;
      const two = block.body[at >> 3]! | (block.body[(at >> 3) + 1]! << 8);
      if (((two >>> (at & 7)) & 0x1f) !== LITERAL_4) return null;
    }
    const bytes = block.body.length + (subFirst ? 1 : 0);
    const bits = block.bits + (subFirst ? 8 : 0);
    blocks.push({ body: block.body, bytes, bits, subFirst });
    zlibLength += bytes + (k === pngs.length - 1 ? 0 : syncLength(bytes * 8 - bits));
    // The band's Adler-32 is over its filtered rows with 4 as the first row's filter byte: 1 now.
    const [start, end] = rows[k]!;
    const length = (end - start) * (rowBytes + 1);
    const bandAdler = zlib.readUInt32BE(zlib.length - 4);
    adler = k === 0 ? bandAdler : adler32Combine(adler, adler32FirstByteChanged(bandAdler, length, 1 - 4), length);
  }
  const out = Buffer.allocUnsafe(SIGNATURE.length + 25 + 12 + zlibLength + IEND.length);
  out.set(SIGNATURE, 0);
  const header = Buffer.from(ihdr!);
  header.writeUInt32BE(rows[rows.length - 1]![1], 4);
  out.set(chunk('IHDR', header), SIGNATURE.length);
  const idat = SIGNATURE.length + 25;
  out.writeUInt32BE(zlibLength, idat);
  out.write('IDAT', idat + 4, 'latin1');
  let at = idat + 8;
  out[at++] = STREAM_START[0]!;
  out[at++] = STREAM_START[1]!;
  blocks.forEach((block, k) => {
    const first = at;
    if (block.subFirst) {
      out.set(SUB_PREFIX.subarray(0, SUB_PREFIX_WHOLE_BYTES), at);
      const shared = SUB_PREFIX_WHOLE_BYTES - 1; // the block's byte that holds its bits 416..423
      out[at + SUB_PREFIX_WHOLE_BYTES] = (SUB_PREFIX[SUB_PREFIX_WHOLE_BYTES]! & 0x03) | (block.body[shared]! & 0xfc);
      out.set(block.body.subarray(shared + 1), at + SUB_PREFIX_WHOLE_BYTES + 1);
    } else out.set(block.body, at);
    at += block.bytes;
    if (k < blocks.length - 1) {
      out[first] = out[first]! & 0xfe; // not the final block
      // An empty stored block: its 3 header bits in the padding when they fit, else in one more byte.
      if (block.bytes * 8 - block.bits < 3) out[at++] = 0;
      out.set(SYNC, at);
      at += SYNC.length;
    }
  });
  out.writeUInt32BE(adler, at);
  at += 4;
  out.writeUInt32BE(crc32(out.subarray(idat + 4, at)), at);
  out.set(IEND, at + 4);
  return out;
}

/** Bytes of the sync flush after a block whose last byte has `padding` spare bits. */
function syncLength(padding: number): number {
  return (padding >= 3 ? 0 : 1) + SYNC.length;
}

/** The encoder's calls this needs (png-encoder.ts gives @napi-rs/image's). */
export interface BandEncoder {
  /** Copies `rgba` (synchronously) and encodes it on another thread (libuv's). */
  encodeAsync(rgba: Uint8Array, width: number, height: number): Promise<Buffer>;
  /** Encodes `rgba` on this thread. */
  encodeSync(rgba: Uint8Array, width: number, height: number): Buffer;
}

/**
 * `rgba` as one PNG encoded in `bands` row bands at once, or null when the bands' streams cannot be
 * joined (the caller then encodes it whole).
 */
export async function encodeInBands(encoder: BandEncoder, rgba: Uint8Array, width: number, height: number, bands: number): Promise<Buffer | null> {
  const rowBytes = width * 4;
  const rows = bandRows(height, bands);
  const band = ([start, end]: [number, number]) => [rgba.subarray(start * rowBytes, end * rowBytes), width, end - start] as const;
  // The other bands go to libuv's threads first; the first is encoded meanwhile on this thread,
  // which would otherwise wait idle (the render's own core), with no hand-off.
  const others = rows.slice(1).map((r) => encoder.encodeAsync(...band(r)));
  let first: Buffer;
  try {
    first = encoder.encodeSync(...band(rows[0]!));
  } catch (error) {
    await Promise.allSettled(others);
    throw error;
  }
  return joinBands([first, ...(await Promise.all(others))], rows, rowBytes);
}
