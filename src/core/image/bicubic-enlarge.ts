/**
 * The enlarging half of sharp's `resize(w, h, { fit: 'fill' })`, byte for byte: WebAssembly SIMD
 * (bicubic-enlarge.wat) for both passes where the rows allow, JavaScript for the rest and as the
 * reference.
 *
 * Why: when an axis grows (a 1224x816 photo to the model's 1024x1024), libvips 8.18 does not use
 * the resize kernel for it: vips_resize reduces the shrinking axes first (vips_reducev, then
 * vips_reduceh, with the kernel) and then enlarges with vips_affine and the `bicubic`
 * (Catmull-Rom) interpolator, a 2-D 4x4 stencil per output sample that is not vectorised. On a
 * 1 MP photo that affine was the largest single cost of a cutout's API CPU (about 40 ms). The
 * same arithmetic done separably here (one pass along x over the input rows, one along y) gives
 * the same bytes for a fraction of the work. Callers run it in the pixel pool's worker thread,
 * never on the host's event loop.
 *
 * What is replicated (libvips 8.18: resample/resize.c, affine.c, transform.c, bicubic.cpp,
 * templates.h; sharp's pipeline.cc and common.cc ResolveShrink):
 * - Scales: sharp passes `scale = 1 / (in / out)` per axis; vips_resize gives the affine a matrix
 *   [a 0; 0 d] with a = hscale when x grows, else 1 (likewise d), `idx = idy = 0.5` (8.18; 8.19
 *   scales this offset, see below) and EXTEND_COPY. The affine inverts it (det = a*d - 0*0,
 *   ia = (1/det)*d, id = (1/det)*a), embeds the input in a border of window_offset + 1 = 2
 *   copied pixels and moves its offsets by -1 to match.
 * - Positions (vips_affine_gen, with each output region's left edge at 0, as sharp's raw output
 *   asks for whole-width strips): along x the position starts at 0 - (0.5 - 1) + 1 = 1.5 and
 *   ia is ADDED once per pixel (accumulated, with its rounding); where the pipeline is made in
 *   tiles (an image turned by 90 or 270 degrees before the resize: libvips's rot90 asks for
 *   small tiles, and every operation after it inherits that), each tile starts afresh at
 *   ia * left - (0.5 - 1) + 1, which can round differently (ENLARGE_TILE_WIDTH); along y it is
 *   (id * y - (0.5 - 1)) + 1 for each row. In the bordered image; the taps are
 *   trunc(p) - 1 .. trunc(p) + 2 there, so trunc(p) - 3 .. trunc(p) in the original, clamped to
 *   it (the copied border).
 * - The fraction: trunc(p * 64 * 2) & 127, plus one, halved: a table index 0..64 (round to the
 *   nearest 1/64, 64 meaning "1.0" with the same taps).
 * - Coefficients: Catmull-Rom at (float) i / 64, computed as libvips computes them in double
 *   (calculate_coefficients_catmull), times 4096 and truncated to int.
 * - Arithmetic (bicubic_unsigned_int): each of the 4 rows is summed along x and rounded,
 *   (sum + 2048) >> 12 (an arithmetic shift, so floor, and negative or above 255 kept), then the
 *   4 row results along y the same way, then clipped to 0..255. Rounding x first, then y, is
 *   what makes the separable form exact: a row's x-result depends only on (input row, output
 *   column), so it is computed once and reused by every output row whose stencil holds it.
 * - An axis that does not grow still goes through the interpolator (a = 1): with the 0.5 offset
 *   its position is i + 1.5, a half-pixel shift with coefficients (-1, 9, 9, -1) / 16 over input
 *   i - 2 .. i + 1. That is what libvips 8.18 does (8.19 changes the offset to
 *   0.5 * (1 - 1 / scale), which makes such an axis the identity; the byte-identity test against
 *   sharp catches the day the bundled libvips changes it).
 *
 * Only 8-bit pixels, any number of interleaved channels, no alpha premultiplication (the callers
 * resize opaque RGB; sharp premultiplies an alpha channel before resizing, which is not done here).
 */
import { BICUBIC_ENLARGE_WASM } from './bicubic-enlarge-wasm.js';
import { align, boundedInstance, compiledOnce } from './simd-module.js';
import { countKernel } from './kernel-calls.js';

/**
 * The width of the tiles libvips makes an image in when its pipeline asks for small tiles
 * (VIPS__TILE_WIDTH; only a debugging command-line flag changes it, which sharp never passes).
 */
export const ENLARGE_TILE_WIDTH = 128;

/** VIPS_TRANSFORM_SCALE: fractions are quantised to 1/64 of a pixel. */
const TRANSFORM_SCALE = 64;
/** VIPS_INTERPOLATE_SHIFT: coefficients are fixed point with 12 fraction bits. */
const INTERPOLATE_SHIFT = 12;
const INTERPOLATE_SCALE = 1 << INTERPOLATE_SHIFT;
const ROUND_BY = INTERPOLATE_SCALE >> 1;

/** vips_bicubic_matrixi: 65 rows of 4 fixed-point Catmull-Rom weights, index = 64ths of a pixel. */
const COEFFICIENTS = (() => {
  const table = new Int32Array((TRANSFORM_SCALE + 1) * 4);
  for (let i = 0; i <= TRANSFORM_SCALE; i++) {
    // (float) x / VIPS_TRANSFORM_SCALE, then the double arithmetic of calculate_coefficients_catmull.
    const x = Math.fround(i / TRANSFORM_SCALE);
    const cr1 = 1 - x;
    const cr2 = -0.5 * x;
    const cr3 = cr1 * cr2;
    const cone = cr1 * cr3;
    const cfou = x * cr3;
    const cr4 = cfou - cone;
    const ctwo = cr1 - cone + cr4;
    const cthr = x - cfou - cr4;
    // C's double-to-int conversion truncates toward zero.
    table[i * 4] = Math.trunc(cone * INTERPOLATE_SCALE);
    table[i * 4 + 1] = Math.trunc(ctwo * INTERPOLATE_SCALE);
    table[i * 4 + 2] = Math.trunc(cthr * INTERPOLATE_SCALE);
    table[i * 4 + 3] = Math.trunc(cfou * INTERPOLATE_SCALE);
  }
  return table;
})();

/** One axis's stencils: for output i, its 4 input indices (clamped) and its coefficient row. */
interface AxisTaps {
  /** 4 per output sample: input indices, already clamped to 0..n-1. */
  taps: Int32Array;
  /** Per output sample: the first of its 4 coefficients in COEFFICIENTS. */
  weights: Int32Array;
  /** True when every sample is the half-pixel (-1, 9, 9, -1) / 16 stencil over i - 2 .. i + 1 (an axis that does not grow). */
  halfShift: boolean;
}

function axisTaps(positions: Float64Array, n: number): AxisTaps {
  const m = positions.length;
  const taps = new Int32Array(m * 4);
  const weights = new Int32Array(m);
  let halfShift = m === n;
  for (let i = 0; i < m; i++) {
    const p = positions[i]!;
    const s = Math.trunc(p * TRANSFORM_SCALE * 2);
    const t = ((s & (TRANSFORM_SCALE * 2 - 1)) + 1) >> 1;
    const first = Math.trunc(p) - 3;
    for (let k = 0; k < 4; k++) taps[i * 4 + k] = Math.min(n - 1, Math.max(0, first + k));
    weights[i] = t * 4;
    if (t !== TRANSFORM_SCALE / 2 || first !== i - 2) halfShift = false;
  }
  return { taps, weights, halfShift };
}

/**
 * x positions: vips_affine_gen's ix, stepping by ia from each output region's left edge: 0 for
 * whole-width strips, every `tileWidth` columns for tiles (where it starts afresh, ia * ox).
 */
function xPositions(m: number, ia: number, tileWidth: number): Float64Array {
  const out = new Float64Array(m);
  let ix = 0;
  for (let x = 0; x < m; x++) {
    if (x % tileWidth === 0) {
      ix = ia * x; // ia * ox + ib * oy with ox = the region's left edge, ib = -0
      ix -= -0.5; // trn.idx: 0.5 from vips_resize, -1 for the affine's extra border pixel
      ix += 1; // window_offset
    }
    out[x] = ix;
    ix += ia;
  }
  return out;
}

/** y positions: vips_affine_gen's iy, computed afresh for each output row. */
function yPositions(m: number, id: number): Float64Array {
  const out = new Float64Array(m);
  for (let y = 0; y < m; y++) {
    let iy = id * y; // ic * ox + id * oy with ic * ox = -0
    iy -= -0.5;
    iy += 1;
    out[y] = iy;
  }
  return out;
}

/** The few WebAssembly calls used here (the project's TypeScript libs declare none). */

/** The SIMD kernels (bicubic-enlarge.wat), compiled once per thread; null where WebAssembly SIMD is missing. */
const simdModule = compiledOnce(BICUBIC_ENLARGE_WASM);

/** Whether this thread runs the SIMD kernels (WebAssembly SIMD compiled); else the JavaScript loops. */
export function enlargesWithSimd(): boolean {
  return simdModule() !== null;
}

interface SimdKernels {
  colsFromPlan(src: number, mid: number, rows: number, inRow: number, midRow: number, plan: number, groups: number): void;
  halfRows(src: number, mid: number, rows: number, rowLen: number, channels: number): void;
  rowsFromPlan(mid: number, out: number, rowLen: number, outRows: number, plan: number): void;
}

/**
 * The largest memory a thread keeps between calls: the model's input (1024x1024 RGB, from at
 * most 1024 rows) needs about 12 MiB. A fresh memory costs its page faults and zeroing (about
 * 6 ms for 11 MiB here, more than the kernels), so it is kept; a bigger job gets one of its own,
 * dropped after it.
 */
const KEPT_MEMORY_BYTES = 16 << 20;
const instanceFor = boundedInstance<SimdKernels>(KEPT_MEMORY_BYTES);

/**
 * `src` (width x height, `channels` interleaved 8-bit) enlarged to outWidth x outHeight as
 * libvips 8.18's vips_resize enlarges, for sharp's fit 'fill'. Each axis must grow or stay: an
 * axis that shrinks is sharp's to reduce first (resize to the smaller size with that axis at its
 * target, the growing one unchanged), as vips_resize reduces before it enlarges. `simd: false`
 * keeps to the JavaScript loops (the tests compare both ways with sharp).
 */
export function enlargeBicubic(
  src: Uint8Array,
  width: number,
  height: number,
  channels: number,
  outWidth: number,
  outHeight: number,
  options: {
    simd?: boolean;
    /**
     * Where the result goes (outWidth x outHeight x channels bytes long), e.g. shared memory the
     * caller hands on: written there once rather than into a fresh buffer the caller copies again.
     */
    into?: Uint8Array;
    /** libvips makes the output in tiles this wide, not whole-width strips (see ENLARGE_TILE_WIDTH). */
    tileWidth?: number;
  } = {},
): Buffer {
  countKernel('enlargeBicubic');
  if (![width, height, channels, outWidth, outHeight].every((n) => Number.isInteger(n) && n >= 1)) throw new RangeError('enlargeBicubic: sizes must be positive integers');
  if (outWidth < width || outHeight < height) throw new RangeError(`enlargeBicubic: ${width}x${height} to ${outWidth}x${outHeight} shrinks an axis`);
  if (src.length !== width * height * channels) throw new RangeError(`enlargeBicubic: ${src.length} bytes for ${width}x${height}x${channels}`);

  // sharp: hshrink = in / out, scale = 1 / hshrink; vips_resize: a = hscale only when x grows.
  const a = outWidth > width ? 1 / (width / outWidth) : 1;
  const d = outHeight > height ? 1 / (height / outHeight) : 1;
  // vips__transform_calc_inverse (b = c = 0).
  const tmp = 1 / (a * d - 0 * 0);
  const ia = tmp * d;
  const id = tmp * a;
  const tileWidth = options.tileWidth ?? outWidth;
  if (!Number.isInteger(tileWidth) || tileWidth < 1) throw new RangeError(`enlargeBicubic: tile width ${tileWidth}`);
  const xs = axisTaps(xPositions(outWidth, ia, tileWidth), width);
  const ys = axisTaps(yPositions(outHeight, id), height);

  const inRow = width * channels;
  const midRow = outWidth * channels;
  const into = options.into;
  if (into && into.length !== outHeight * midRow) throw new RangeError(`enlargeBicubic: ${into.length} bytes to write ${outWidth}x${outHeight}x${channels} into`);
  const module = options.simd === false || midRow < 16 ? null : simdModule();
  if (!module) {
    const mid = new Int16Array(height * midRow);
    passAlongX(src, mid, width, height, channels, outWidth, xs, 0, outWidth);
    const out = into ? new Uint8ClampedArray(into.buffer, into.byteOffset, into.byteLength) : new Uint8ClampedArray(outHeight * midRow);
    passAlongY(mid, out, midRow, outHeight, ys);
    return Buffer.from(out.buffer, out.byteOffset, out.byteLength);
  }

  // The call's memory: [plan | x plan | mid (int16) | src | out].
  const planAt = 0;
  const xGroups = xs.halfShift ? 0 : Math.ceil(midRow / 8);
  const xPlanAt = align(outHeight * 32);
  const midAt = align(xPlanAt + xGroups * X_STEP_BYTES);
  const srcAt = align(midAt + height * midRow * 2);
  const outAt = align(srcAt + src.length);
  const { memory, kernels } = instanceFor(module, outAt + outHeight * midRow);
  const mid = new Int16Array(memory.buffer, midAt, height * midRow);
  if (xs.halfShift && inRow >= 3 * channels + 8) {
    new Uint8Array(memory.buffer, srcAt, src.length).set(src);
    kernels.halfRows(srcAt, midAt, height, inRow, channels);
    // The edge columns (0, 1 and the last), whose stencils the copied border clamps.
    passAlongX(src, mid, width, height, channels, outWidth, xs, 0, 2);
    passAlongX(src, mid, width, height, channels, outWidth, xs, width - 1, width);
  } else if (writeXPlan(memory.buffer, xPlanAt, xs, channels, midRow)) {
    new Uint8Array(memory.buffer, srcAt, src.length).set(src);
    kernels.colsFromPlan(srcAt, midAt, height, inRow, midRow, xPlanAt, xGroups);
    countKernel('enlargeBicubic.simdAlongX');
  } else {
    passAlongX(src, mid, width, height, channels, outWidth, xs, 0, outWidth);
  }
  const plan = new Int32Array(memory.buffer, planAt, outHeight * 8);
  for (let y = 0; y < outHeight; y++) {
    for (let k = 0; k < 4; k++) {
      plan[y * 8 + k] = ys.taps[y * 4 + k]!;
      plan[y * 8 + 4 + k] = COEFFICIENTS[ys.weights[y]! + k]!;
    }
  }
  kernels.rowsFromPlan(midAt, outAt, midRow, outHeight, planAt);
  const result = new Uint8Array(memory.buffer, outAt, outHeight * midRow);
  if (!into) return Buffer.from(result);
  into.set(result);
  return Buffer.from(into.buffer, into.byteOffset, into.byteLength);
}

/** One step of colsFromPlan's plan: 8 output samples (bicubic-enlarge.wat describes the layout). */
const X_STEP_BYTES = 144;

/**
 * colsFromPlan's plan for a growing x axis, written at `at`: per step of 8 output samples (the
 * last step overlapping the one before where midRow is not a multiple of 8), two 16-byte windows
 * of the input row and the swizzle masks and weights that pick each sample's 4 (clamped) taps
 * from them. False, with nothing to run, where some 4 consecutive samples' taps span more than 16
 * bytes (more than 4 channels; an enlarging axis moves at most one pixel per output pixel, so 1-4
 * channels always fit): the JavaScript pass does those.
 */
function writeXPlan(buffer: ArrayBuffer, at: number, xs: AxisTaps, channels: number, midRow: number): boolean {
  const groups = Math.ceil(midRow / 8);
  const words = new Int32Array(buffer, at, groups * (X_STEP_BYTES / 4));
  const bytes = new Uint8Array(buffer, at, groups * X_STEP_BYTES);
  const halves = new Int16Array(buffer, at, groups * (X_STEP_BYTES / 2));
  for (let g = 0; g < groups; g++) {
    const start = Math.min(g * 8, midRow - 8);
    const q = g * X_STEP_BYTES;
    words[q / 4] = start;
    words[q / 4 + 3] = 0;
    for (let half = 0; half < 2; half++) {
      const first = start + half * 4;
      let base = Infinity;
      let top = -1;
      for (let j = first; j < first + 4; j++) {
        const x = Math.floor(j / channels);
        const z = j - x * channels;
        for (let k = 0; k < 4; k++) {
          const b = xs.taps[x * 4 + k]! * channels + z;
          base = Math.min(base, b);
          top = Math.max(top, b);
        }
      }
      if (top - base > 15) return false;
      words[q / 4 + 1 + half] = base;
      const masks = q + 16 + half * 64;
      for (let e = 0; e < 4; e++) {
        const j = first + e;
        const x = Math.floor(j / channels);
        const z = j - x * channels;
        for (let k = 0; k < 4; k++) {
          // taps 0, 1 in the first mask and weight vector, 2, 3 in the second; int16 pair e.
          const mask = masks + (k >> 1) * 16 + e * 4 + (k & 1) * 2;
          bytes[mask] = xs.taps[x * 4 + k]! * channels + z - base;
          bytes[mask + 1] = 0x80;
          halves[(mask + 32) / 2] = COEFFICIENTS[xs.weights[x]! + k]!;
        }
      }
    }
  }
  return true;
}

/**
 * Pass 1, along x: every input row, output columns x0 .. x1 - 1: the rounded (unclipped) sums
 * of each row's 4 taps, kept for pass 2.
 */
function passAlongX(src: Uint8Array, mid: Int16Array, width: number, height: number, channels: number, outWidth: number, xs: AxisTaps, x0: number, x1: number): void {
  const inRow = width * channels;
  const midRow = outWidth * channels;
  for (let r = 0; r < height; r++) {
    const s0 = r * inRow;
    const m0 = r * midRow;
    if (xs.halfShift) {
      // Weights (-256, 2304, 2304, -256): sum = 256 * (9 (b + c) - (a + d)), so
      // (sum + 2048) >> 12 is (9 (b + c) - (a + d) + 8) >> 4.
      for (let x = x0; x < x1; x++) {
        const xa = Math.max(0, x - 2) * channels;
        const xb = Math.max(0, x - 1) * channels;
        const xc = x * channels;
        const xd = Math.min(width - 1, x + 1) * channels;
        for (let z = 0; z < channels; z++) {
          mid[m0 + xc + z] = (9 * (src[s0 + xb + z]! + src[s0 + xc + z]!) - (src[s0 + xa + z]! + src[s0 + xd + z]!) + 8) >> 4;
        }
      }
    } else if (channels === 3) {
      // RGB spelled out: the per-channel loop costs more than its arithmetic here.
      for (let x = x0; x < x1; x++) {
        const w = xs.weights[x]!;
        const c0 = COEFFICIENTS[w]!;
        const c1 = COEFFICIENTS[w + 1]!;
        const c2 = COEFFICIENTS[w + 2]!;
        const c3 = COEFFICIENTS[w + 3]!;
        const t0 = s0 + xs.taps[x * 4]! * 3;
        const t1 = s0 + xs.taps[x * 4 + 1]! * 3;
        const t2 = s0 + xs.taps[x * 4 + 2]! * 3;
        const t3 = s0 + xs.taps[x * 4 + 3]! * 3;
        const o = m0 + x * 3;
        mid[o] = (c0 * src[t0]! + c1 * src[t1]! + c2 * src[t2]! + c3 * src[t3]! + ROUND_BY) >> INTERPOLATE_SHIFT;
        mid[o + 1] = (c0 * src[t0 + 1]! + c1 * src[t1 + 1]! + c2 * src[t2 + 1]! + c3 * src[t3 + 1]! + ROUND_BY) >> INTERPOLATE_SHIFT;
        mid[o + 2] = (c0 * src[t0 + 2]! + c1 * src[t1 + 2]! + c2 * src[t2 + 2]! + c3 * src[t3 + 2]! + ROUND_BY) >> INTERPOLATE_SHIFT;
      }
    } else {
      for (let x = x0; x < x1; x++) {
        const w = xs.weights[x]!;
        const c0 = COEFFICIENTS[w]!;
        const c1 = COEFFICIENTS[w + 1]!;
        const c2 = COEFFICIENTS[w + 2]!;
        const c3 = COEFFICIENTS[w + 3]!;
        const t0 = s0 + xs.taps[x * 4]! * channels;
        const t1 = s0 + xs.taps[x * 4 + 1]! * channels;
        const t2 = s0 + xs.taps[x * 4 + 2]! * channels;
        const t3 = s0 + xs.taps[x * 4 + 3]! * channels;
        const o = m0 + x * channels;
        for (let z = 0; z < channels; z++) {
          mid[o + z] = (c0 * src[t0 + z]! + c1 * src[t1 + z]! + c2 * src[t2 + z]! + c3 * src[t3 + z]! + ROUND_BY) >> INTERPOLATE_SHIFT;
        }
      }
    }
  }
}

/** Pass 2, along y: each output row from 4 rows of pass 1, rounded, clipped by the clamped array. */
function passAlongY(mid: Int16Array, out: Uint8ClampedArray, midRow: number, outHeight: number, ys: AxisTaps): void {
  for (let y = 0; y < outHeight; y++) {
    const r0 = ys.taps[y * 4]! * midRow;
    const r1 = ys.taps[y * 4 + 1]! * midRow;
    const r2 = ys.taps[y * 4 + 2]! * midRow;
    const r3 = ys.taps[y * 4 + 3]! * midRow;
    const o = y * midRow;
    if (ys.halfShift) {
      for (let i = 0; i < midRow; i++) out[o + i] = (9 * (mid[r1 + i]! + mid[r2 + i]!) - (mid[r0 + i]! + mid[r3 + i]!) + 8) >> 4;
    } else {
      const w = ys.weights[y]!;
      const c0 = COEFFICIENTS[w]!;
      const c1 = COEFFICIENTS[w + 1]!;
      const c2 = COEFFICIENTS[w + 2]!;
      const c3 = COEFFICIENTS[w + 3]!;
      for (let i = 0; i < midRow; i++) {
        out[o + i] = (c0 * mid[r0 + i]! + c1 * mid[r1 + i]! + c2 * mid[r2 + i]! + c3 * mid[r3 + i]! + ROUND_BY) >> INTERPOLATE_SHIFT;
      }
    }
  }
}
