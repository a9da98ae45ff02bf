/**
 * The render's full-size pixel loops in WebAssembly (render-compose.wat), byte for byte the
 * JavaScript's (output.ts and full-size-mask.ts keep theirs, as the reference and for where
 * WebAssembly SIMD is missing): the RGBA compose without a background (every PNG cutout) and over
 * a translucent colour, the colour over an opaque background (JPEG, or `bg_color`), an RGBA
 * input's own alpha folded into the mask, the foreground's and the soft pixels' boxes, and
 * `best`'s crop merge (`replace`). At 1 MP they took ~1.4, ~15, ~9, ~10, ~0.5 each and ~4 ms of
 * the pixel worker's CPU in JavaScript (docs/benchmarks-history.md, "Ninth round: render kernels").
 *
 * The pixels go through the module's memory in bands of BAND_PIXELS (copied in, worked on, copied
 * out: ~0.2 ms per 3 MB, shared memory included), so the memory stays about 0.6 MB whatever the
 * image's size.
 */
import { countKernel } from './kernel-calls.js';
import { RENDER_COMPOSE_WASM } from './render-compose-wasm.js';
import { align, compiledOnce, grownInstance } from './simd-module.js';

/** The kernels, on byte offsets into the module's memory (render-compose.wat documents each). */
interface Kernels {
  rgba(rgb: number, alpha: number, out: number, n: number): void;
  opaque(rgb: number, alpha: number, out: number, n: number, bg: number): void;
  split(rgba: number, mask: number, rgb: number, n: number): void;
  box(alpha: number, width: number, rows: number, y0: number, box: number, lo: number, span: number): void;
  pasteReplace(base: number, part: number, out: number, width: number, rows: number, rowW: number, colW: number): void;
  overColour(rgb: number, alpha: number, out: number, n: number, table: number): void;
}

const simdModule = compiledOnce(RENDER_COMPOSE_WASM);

/** Whether this thread can run these kernels in WebAssembly SIMD. */
export function composesWithSimd(): boolean {
  return simdModule() !== null;
}

/** Pixels per band (a multiple of 16: the kernels go 16 pixels per step). */
const BAND_PIXELS = 64 << 10;
/** The background's 48 bytes, then the box's four i32. */
const BG_AT = 0;
const BOX_AT = 48;
const HEADER = 64;
/** Past each region: what the kernels read or write beyond a band's last pixel (its last step's rest, 4 bytes more for rgba). */
const PAD = 64;

/** One instance per thread, its memory kept and grown as needed (a fresh one costs page faults). */
const instance = grownInstance<Kernels>();

/**
 * The kernels and three regions of the module's memory for bands of up to `pixels` pixels: one
 * byte (`one`), three (`three`) and four (`four`) per pixel; null where WebAssembly SIMD is missing.
 */
function regions(pixels: number): { kernels: Kernels; bytes: Uint8Array; one: number; three: number; four: number } | null {
  const one = HEADER;
  const three = align(one + pixels + PAD);
  const four = align(three + pixels * 3 + PAD);
  const at = reserve(four + pixels * 4 + PAD);
  return at && { ...at, one, three, four };
}

/** The kernels and a view of the module's memory, at least `size` bytes; null where WebAssembly SIMD is missing. */
function reserve(size: number): { kernels: Kernels; bytes: Uint8Array } | null {
  const module = simdModule();
  if (!module) return null;
  const { memory, kernels } = instance(module, size);
  return { kernels, bytes: new Uint8Array(memory.buffer) };
}

/** Pixels at `at` in the module's memory, `channels` bytes each, copied from or into `pixels` (the caller's array, indexed from pixel 0). */
interface Lane {
  pixels: Uint8Array;
  at: number;
  channels: number;
}

const lane = (pixels: Uint8Array, at: number, channels: number): Lane => ({ pixels, at, channels });

/**
 * The band loop every kernel on whole pixels runs in: pixels [first, end) in bands of `band`
 * (BAND_PIXELS, or whole rows'), each band's `ins` copied into the module's memory, `kernel`
 * run on it (the band's first pixel and its count), its `outs` copied back out. A band's outs
 * are copied after its ins, so an out may be the array an in came from (composeOpaque in place).
 */
function inBands(bytes: Uint8Array, span: { first?: number; end: number; band?: number }, ins: Lane[], kernel: (start: number, count: number) => void, outs: Lane[] = []): void {
  const { first = 0, end, band = BAND_PIXELS } = span;
  for (let start = first; start < end; start += band) {
    const count = Math.min(band, end - start);
    for (const { pixels, at, channels } of ins) bytes.set(pixels.subarray(start * channels, (start + count) * channels), at);
    kernel(start, count);
    for (const { pixels, at, channels } of outs) pixels.set(bytes.subarray(at, at + count * channels), start * channels);
  }
}

/** composeRgba without a background into `out` (pixels x 4 bytes); false, writing nothing, without WebAssembly SIMD. */
export function composeRgbaSimd(rgb: Uint8Array, alpha: Uint8Array, out: Uint8Array): boolean {
  const pixels = alpha.length;
  const at = regions(Math.min(pixels, BAND_PIXELS));
  if (!at) return false;
  const { kernels, bytes, one, three, four } = at;
  inBands(bytes, { end: pixels }, [lane(alpha, one, 1), lane(rgb, three, 3)], (_, count) => kernels.rgba(three, one, four, count), [lane(out, four, 4)]);
  countKernel('composeRgba.simd');
  return true;
}

/** composeOpaque into `out` (pixels x 3 bytes; may be `rgb`); false, writing nothing, without WebAssembly SIMD. */
export function composeOpaqueSimd(rgb: Uint8Array, alpha: Uint8Array, background: { r: number; g: number; b: number }, out: Uint8Array): boolean {
  const pixels = alpha.length;
  const at = regions(Math.min(pixels, BAND_PIXELS));
  if (!at) return false;
  const { kernels, bytes, one, three } = at;
  for (let k = 0; k < 48; k += 3) {
    bytes[BG_AT + k] = background.r;
    bytes[BG_AT + k + 1] = background.g;
    bytes[BG_AT + k + 2] = background.b;
  }
  inBands(bytes, { end: pixels }, [lane(alpha, one, 1), lane(rgb, three, 3)], (_, count) => kernels.opaque(three, one, three, count, BG_AT), [lane(out, three, 3)]);
  countKernel('composeOpaque.simd');
  return true;
}

/** splitAlpha: `rgba`'s colour into `rgb` (pixels x 3 bytes), its alpha folded into `mask` in place; false, writing nothing, without WebAssembly SIMD. */
export function splitAlphaSimd(rgba: Uint8Array, mask: Uint8Array, rgb: Uint8Array): boolean {
  const pixels = mask.length;
  const at = regions(Math.min(pixels, BAND_PIXELS));
  if (!at) return false;
  const { kernels, bytes, one, three, four } = at;
  inBands(bytes, { end: pixels }, [lane(mask, one, 1), lane(rgba, four, 4)], (_, count) => kernels.split(four, one, three, count), [lane(mask, one, 1), lane(rgb, three, 3)]);
  countKernel('splitAlpha.simd');
  return true;
}

/**
 * The box of the pixels of a width x height alpha whose value is in [lo, hi], in rows [top,
 * bottom) (foregroundBox's: 13..255; softBounds's: 1..254): null when there is none; undefined
 * without WebAssembly SIMD.
 */
export function alphaBoxSimd(
  alpha: Uint8Array,
  width: number,
  rows: { top: number; bottom: number },
  lo: number,
  hi: number,
): { top: number; bottom: number; left: number; right: number } | null | undefined {
  // Whole rows per band, at least one (however wide).
  const bandRows = Math.max(1, Math.floor(BAND_PIXELS / width));
  const at = regions(Math.min(rows.bottom - rows.top, bandRows) * width);
  if (!at) return undefined;
  const { kernels, bytes, one } = at;
  const box = new Int32Array(bytes.buffer, BOX_AT, 4);
  box.set([rows.bottom, -1, width, -1]);
  // Bands of whole rows: each band's first pixel and count are whole multiples of the width.
  inBands(bytes, { first: rows.top * width, end: rows.bottom * width, band: bandRows * width }, [lane(alpha, one, 1)], (start, count) =>
    kernels.box(one, width, count / width, start / width, BOX_AT, lo, hi - lo),
  );
  const [top, bottom, left, right] = box as unknown as [number, number, number, number];
  return bottom < 0 ? null : { top, bottom, left, right };
}

/**
 * pasteBlended's `replace` merge of `part` (the region's size) into `out` (a copy of the
 * width-wide `alpha`), given each region row's and column's ramp weight (`rowW`, `colW`, as
 * pasteBlended computes them); false, writing nothing, without WebAssembly SIMD.
 */
export function pasteReplaceSimd(
  alpha: Uint8Array,
  width: number,
  out: Uint8Array,
  part: Uint8Array,
  region: { left: number; top: number; width: number; height: number },
  rowW: Float64Array,
  colW: Float64Array,
): boolean {
  const rw = region.width;
  const bandRows = Math.max(1, Math.min(region.height, Math.floor(BAND_PIXELS / rw)));
  const pixels = bandRows * rw;
  // [column weights (f64, 4 more) | band's row weights | mask rows | pass rows | merged rows]
  const colAt = HEADER;
  const rowAt = align(colAt + (rw + 4) * 8);
  const baseAt = align(rowAt + bandRows * 8);
  const partAt = align(baseAt + pixels + PAD);
  const outAt = align(partAt + pixels + PAD);
  const at = reserve(outAt + pixels + PAD);
  if (!at) return false;
  const { kernels, bytes } = at;
  new Float64Array(bytes.buffer, colAt, rw).set(colW);
  const rows = new Float64Array(bytes.buffer, rowAt, bandRows);
  for (let y = 0; y < region.height; y += bandRows) {
    const count = Math.min(bandRows, region.height - y);
    rows.set(rowW.subarray(y, y + count));
    for (let i = 0; i < count; i++) {
      const from = (region.top + y + i) * width + region.left;
      bytes.set(alpha.subarray(from, from + rw), baseAt + i * rw);
    }
    bytes.set(part.subarray(y * rw, (y + count) * rw), partAt);
    kernels.pasteReplace(baseAt, partAt, outAt, rw, count, rowAt, colAt);
    for (let i = 0; i < count; i++) out.set(bytes.subarray(outAt + i * rw, outAt + (i + 1) * rw), (region.top + y + i) * width + region.left);
  }
  countKernel('pasteBlended.simd');
  return true;
}

/** overColour's table: 40 bytes per alpha value (render-compose.wat). */
const TABLE_ROW = 40;

/**
 * composeRgba over a translucent colour (background alpha below 1) into `out` (pixels x 4 bytes),
 * the JavaScript's bytes: its per-pixel doubles depend on the alpha alone but for the colour's
 * product, so they are made once per alpha value here, by the same expressions, and the kernel
 * does the rest. False, writing nothing, without WebAssembly SIMD.
 */
export function composeOverColourSimd(rgb: Uint8Array, alpha: Uint8Array, background: { r: number; g: number; b: number; alpha: number }, out: Uint8Array): boolean {
  const pixels = alpha.length;
  const band = Math.min(pixels, BAND_PIXELS);
  const tableAt = HEADER;
  const one = align(tableAt + 256 * TABLE_ROW);
  const three = align(one + band + PAD);
  const four = align(three + band * 3 + PAD);
  const at = reserve(four + band * 4 + PAD);
  if (!at) return false;
  const { kernels, bytes } = at;
  const table = new DataView(bytes.buffer, tableAt, 256 * TABLE_ROW);
  const ba = background.alpha;
  for (let v = 0; v < 256; v++) {
    // composeRgba's expressions, in its order (output.ts).
    const a = v / 255;
    const outA = a + ba * (1 - a);
    const row = v * TABLE_ROW;
    if (outA <= 0) {
      // Four zero bytes (the JavaScript's transparent pixel): 0 c + 0, alpha 0.
      for (let k = 0; k < TABLE_ROW; k++) table.setUint8(row + k, 0);
      continue;
    }
    const wb = (ba * (1 - a)) / outA;
    const wf = a / outA;
    table.setFloat64(row, wf, true);
    table.setFloat64(row + 8, background.r * wb, true);
    table.setFloat64(row + 16, background.g * wb, true);
    table.setFloat64(row + 24, background.b * wb, true);
    table.setUint8(row + 32, Math.round(outA * 255));
  }
  inBands(bytes, { end: pixels }, [lane(alpha, one, 1), lane(rgb, three, 3)], (_, count) => kernels.overColour(three, one, four, count, tableAt), [lane(out, four, 4)]);
  countKernel('composeRgba.simd');
  return true;
}
