/**
 * The horizontal reducing half of sharp's `resize(w, h, { fit: 'fill' })` (kernel lanczos3, sharp's
 * default), byte for byte: libvips 8.18's vips_reduceh on 8-bit pixels. WebAssembly SIMD
 * (lanczos-reduce.wat) for 3-channel rows, JavaScript for the rest and as the reference.
 *
 * Why: the model input of a photo wider than the model but not as tall (1224x816 to 1024x1024)
 * asked sharp for this reduce (about 7 ms at 1 MP, of which the raw pipeline's own overhead and
 * the page faults of its fresh output are most) before bicubic-enlarge.ts grows the height. Done
 * here on the decoded pixels, the decode's raw goes straight to the reduce and the enlarge.
 *
 * What is replicated (libvips 8.18: resample/resize.c, reduceh.cpp, reduceh_hwy.cpp, templates.h;
 * sharp's common.cc ResolveShrink and pipeline.cc):
 * - The factor: sharp passes `scale = 1 / (in / out)`; vips_resize gives vips_reduceh
 *   `hshrink = 1 / scale` and gap 2. The output width is round(in / hshrink). With the gap, an
 *   integer vips_shrinkh goes first when floor(in / width / 2) > 1 (a reduce by 4 or more): not
 *   replicated, reduceWidthExactly says no and the caller keeps sharp.
 * - Points: n = 2 * rint(3 * hshrink) + 1 (rint: halves to even).
 * - The masks: for t = 0..64, x = (float) t / 64, lanczos3 at (i - (x + n / 2 - 1)) / hshrink for
 *   i = 0..n-1, in double, each divided by their sum, times 4096 and truncated to int16
 *   (vips_reduce_make_mask, calculate_coefficients).
 * - Positions: the input is embedded in a border of ceil(n / 2) - 1 copied pixels (EXTEND_COPY);
 *   hoffset = (1 + (width * hshrink - in)) / 2 - 1; X starts at (left + 0.5) * hshrink - 0.5 -
 *   hoffset for each output region (left = 0: sharp's raw output asks for whole-width strips) and
 *   hshrink is ADDED once per pixel (accumulated, with its rounding). The taps are
 *   trunc(X) .. trunc(X) + n - 1 in the bordered row, the mask (trunc(X * 128) & 127 + 1) >> 1.
 * - Arithmetic: sum of int16 mask times uint8 pixel in int32, (sum + 2048) >> 12, clipped to
 *   0..255 (reduceh_uchar_hwy and the C path agree: the sum is exact either way).
 */
import { LANCZOS_REDUCE_WASM } from './lanczos-reduce-wasm.js';
import { align, boundedInstance, compiledOnce } from './simd-module.js';
import { countKernel } from './kernel-calls.js';

/** VIPS_TRANSFORM_SCALE: positions are quantised to 1/64 of a pixel. */
const TRANSFORM_SCALE = 64;
const INTERPOLATE_SHIFT = 12;
const INTERPOLATE_SCALE = 1 << INTERPOLATE_SHIFT;
/** MAX_POINT in libvips's reduce: vips_reduceh refuses a longer mask. */
const MAX_POINT = 2000;

/** C's rint in the default rounding mode: to the nearest, halves to even. */
function rint(v: number): number {
  const f = Math.floor(v);
  const d = v - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

function sinc(x: number): number {
  if (x === 0) return 1;
  const px = x * Math.PI;
  return Math.sin(px) / px;
}

function lanczos3(x: number): number {
  return x >= -3 && x <= 3 ? sinc(x) * sinc(x / 3) : 0;
}

/** The reduce's parameters for `width` to `outWidth` (sharp's arithmetic for the factor), or null where libvips does more than one reduceh. */
export interface ReducePlan {
  hshrink: number;
  points: number;
  /** 65 masks of `points` int16 each. */
  masks: Int16Array;
  /** Per output column: its first tap in the original row (may be negative or past the end: clamp). */
  first: Int32Array;
  /** Per output column: its mask's index 0..64. */
  mask: Int32Array;
}

export function reducePlan(width: number, outWidth: number): ReducePlan | null {
  if (!(Number.isInteger(width) && Number.isInteger(outWidth) && outWidth >= 1 && outWidth < width)) return null;
  // sharp: hshrink = in / out, scale = 1 / hshrink; vips_resize: reduceh by 1 / scale.
  const hshrink = 1 / (1 / (width / outWidth));
  const vipsWidth = Math.floor(width / hshrink + 0.5);
  if (vipsWidth !== outWidth) return null;
  // vips_reduceh's gap (2.0 from vips_resize): an integer shrinkh first where this is above 1.
  if (Math.max(1, Math.floor(width / vipsWidth / 2)) > 1) return null;
  const points = 2 * rint(3 * hshrink) + 1;
  if (points > MAX_POINT) return null;
  const extra = vipsWidth * hshrink - width;
  const hoffset = (1 + extra) / 2 - 1;

  const masks = new Int16Array((TRANSFORM_SCALE + 1) * points);
  const c = new Float64Array(points);
  for (let t = 0; t <= TRANSFORM_SCALE; t++) {
    const x = Math.fround(t / TRANSFORM_SCALE);
    const half = x + points / 2 - 1;
    let sum = 0;
    for (let i = 0; i < points; i++) {
      const l = lanczos3((i - half) / hshrink);
      c[i] = l;
      sum += l;
    }
    for (let i = 0; i < points; i++) masks[t * points + i] = Math.trunc((c[i]! / sum) * INTERPOLATE_SCALE);
  }

  const border = Math.ceil(points / 2) - 1;
  const first = new Int32Array(outWidth);
  const mask = new Int32Array(outWidth);
  let X = (0 + 0.5) * hshrink - 0.5 - hoffset;
  for (let x = 0; x < outWidth; x++) {
    const ix = Math.trunc(X);
    const sx = Math.trunc(X * TRANSFORM_SCALE * 2);
    mask[x] = ((sx & (TRANSFORM_SCALE * 2 - 1)) + 1) >> 1;
    first[x] = ix - border;
    X += hshrink;
  }
  return { hshrink, points, masks, first, mask };
}

/** Whether reduceHorizontal gives libvips's bytes for this reduce (else the caller keeps sharp). */
export function reducesWidthExactly(width: number, outWidth: number): boolean {
  return reducePlan(width, outWidth) !== null;
}

/** The SIMD kernel (lanczos-reduce.wat), compiled once per thread; null where WebAssembly SIMD is missing. */
const simdModule = compiledOnce(LANCZOS_REDUCE_WASM);

interface SimdKernel {
  reduceRows(src: number, srcRow: number, out: number, outRow: number, rows: number, plan: number, outWidth: number, groups: number): void;
  reduceBlocks(src: number, srcRow: number, out: number, outRow: number, rows: number, plan: number, outWidth: number, taps: number, t: number, u: number, tmp: number): void;
}

/** Kept between calls up to this size (a fresh memory's page faults cost more than the kernel). */
const KEPT_MEMORY_BYTES = 16 << 20;
const instanceFor = boundedInstance<SimdKernel>(KEPT_MEMORY_BYTES);

/**
 * `src` (width x height, `channels` interleaved 8-bit) reduced along x to outWidth as sharp's
 * `resize(outWidth, height, { fit: 'fill' })` does it (lanczos3). Throws where
 * reducesWidthExactly is false. `simd: false` keeps to the JavaScript loop (the reference).
 */
export function reduceHorizontal(
  src: Uint8Array,
  width: number,
  height: number,
  channels: number,
  outWidth: number,
  options: {
    simd?: boolean;
    /**
     * The SIMD result may be a view of this thread's kernel memory, valid only until the next
     * call here: for a caller that reads it at once (the enlarge copies it into its own), which
     * saves writing 2.5 MB into a fresh buffer (about 1.5 ms of copy and page faults at 1 MP).
     */
    transient?: boolean;
  } = {},
): Buffer {
  countKernel('reduceHorizontal');
  if (![width, height, channels, outWidth].every((n) => Number.isInteger(n) && n >= 1)) throw new RangeError('reduceHorizontal: sizes must be positive integers');
  if (src.length !== width * height * channels) throw new RangeError(`reduceHorizontal: ${src.length} bytes for ${width}x${height}x${channels}`);
  const plan = reducePlan(width, outWidth);
  if (!plan) throw new RangeError(`reduceHorizontal: ${width} to ${outWidth} is not one exact reduceh`);
  const module = options.simd === false || channels !== 3 ? null : simdModule();
  if (module && height >= 8 && outWidth * 3 >= 8) return reduceSimdBlocks(module, src, width, height, outWidth, plan, options.transient === true);
  if (module) return reduceSimd(module, src, width, height, outWidth, plan, options.transient === true);
  const out = Buffer.allocUnsafe(outWidth * height * channels);
  const { points, masks, first, mask } = plan;
  const inRow = width * channels;
  const outRow = outWidth * channels;
  for (let r = 0; r < height; r++) {
    const s0 = r * inRow;
    for (let x = 0; x < outWidth; x++) {
      const m = mask[x]! * points;
      const f = first[x]!;
      for (let z = 0; z < channels; z++) {
        let sum = 0;
        for (let i = 0; i < points; i++) {
          const j = Math.min(width - 1, Math.max(0, f + i));
          sum += masks[m + i]! * src[s0 + j * channels + z]!;
        }
        const v = (sum + (INTERPOLATE_SCALE >> 1)) >> INTERPOLATE_SHIFT;
        out[r * outRow + x * channels + z] = v < 0 ? 0 : v > 255 ? 255 : v;
      }
    }
  }
  return out;
}

/**
 * The SIMD path, 3 channels: the rows copied into the module's memory with their copied border
 * (the clamp done once per row, not per tap), the taps padded to a multiple of 4 with zero
 * weights, and a plan per output column [tap byte offset, mask address].
 */
function reduceSimd(module: object, src: Uint8Array, width: number, height: number, outWidth: number, plan: ReducePlan, transient: boolean): Buffer {
  const { points, masks } = plan;
  const groups = Math.ceil(points / 4);
  const padded = groups * 4;
  const { left, right } = tapSpan(plan, width, padded);
  // The last group's 16-byte load reaches 4 bytes past its 4 pixels.
  const rowPixels = left + right + 1 + 2;
  const srcRow = rowPixels * 3;
  const outRow = outWidth * 3;
  const { buffer, kernel, planAt, masksAt, at } = layOut(module, plan, left, 3, groups * 32, [height * srcRow + 16, height * outRow + 16]);
  const [srcAt, outAt] = at as [number, number];
  // Each pair of taps' weights repeated across a vector (the kernel's layout).
  const maskHalves = new Int16Array(buffer, masksAt, (TRANSFORM_SCALE + 1) * groups * 16);
  for (let t = 0; t <= TRANSFORM_SCALE; t++) {
    for (let i = 0; i < padded; i += 2) {
      const a = i < points ? masks[t * points + i]! : 0;
      const b = i + 1 < points ? masks[t * points + i + 1]! : 0;
      const at = (t * groups * 32 + i * 8) / 2;
      for (let e = 0; e < 4; e++) {
        maskHalves[at + e * 2] = a;
        maskHalves[at + e * 2 + 1] = b;
      }
    }
  }
  copyRowsWithBorder(new Uint8Array(buffer), src, width, height, srcAt, srcRow, left, rowPixels);
  kernel.reduceRows(srcAt, srcRow, outAt, outRow, height, planAt, outWidth, groups);
  return result(buffer, outAt, height * outRow, transient);
}

/**
 * The SIMD path for 8 rows or more, 3 channels: one row per lane (reduceBlocks in
 * lanczos-reduce.wat), about twice the per-pixel path's speed. The rows are copied in with their
 * copied border, each padded to a multiple of 8 bytes.
 */
function reduceSimdBlocks(module: object, src: Uint8Array, width: number, height: number, outWidth: number, plan: ReducePlan, transient: boolean): Buffer {
  const { points, masks } = plan;
  const { left, right } = tapSpan(plan, width, points);
  const rowPixels = left + right + 1;
  const srcRow = (rowPixels * 3 + 7) & ~7;
  const outRow = outWidth * 3;
  // The rows, then the kernel's scratch (t: 8 rows in, u: 8 rows out, tmp), then the output.
  const { buffer, kernel, planAt, masksAt: weightsAt, at } = layOut(module, plan, left, 24, points * 32, [height * srcRow, srcRow * 8, outRow * 8, 64, height * outRow]);
  const [srcAt, tAt, uAt, tmpAt, outAt] = at as [number, number, number, number, number];
  // Per tap: (w 0 w 0 w 0 w 0) then (0 w 0 w 0 w 0 w), the even rows' and the odd rows' weights.
  const weights = new Int16Array(buffer, weightsAt, (TRANSFORM_SCALE + 1) * points * 16);
  weights.fill(0);
  for (let t = 0; t <= TRANSFORM_SCALE; t++) {
    for (let i = 0; i < points; i++) {
      const w = masks[t * points + i]!;
      const at = (t * points + i) * 16;
      for (let e = 0; e < 4; e++) {
        weights[at + e * 2] = w;
        weights[at + 8 + e * 2 + 1] = w;
      }
    }
  }
  copyRowsWithBorder(new Uint8Array(buffer), src, width, height, srcAt, srcRow, left, rowPixels);
  kernel.reduceBlocks(srcAt, srcRow, outAt, outRow, height, planAt, outWidth, points, tAt, uAt, tmpAt);
  return result(buffer, outAt, height * outRow, transient);
}

/**
 * The bordered row both SIMD paths read: `left` pixels before the row (the first tap's furthest
 * left) and its last pixel's index `right` (at least the row's last), for `taps` taps a column.
 */
function tapSpan(plan: ReducePlan, width: number, taps: number): { left: number; right: number } {
  const { first } = plan;
  let lo = 0;
  let hi = width - 1;
  for (let x = 0; x < first.length; x++) {
    lo = Math.min(lo, first[x]!);
    hi = Math.max(hi, first[x]! + taps - 1);
  }
  return { left: -lo, right: hi };
}

/**
 * Both SIMD paths' module memory, each region 16-byte aligned after the one before: the plan at 0
 * (per output column its first tap's byte offset in its bordered row, `tapBytes` a pixel, and
 * its mask's address), the masks (`maskBytes` per mask index, for the caller to fill), then
 * `regions` (their sizes in bytes, for the caller: the rows, any scratch, the output). The plan
 * is written here; the instance (instanceFor) is sized for the whole.
 */
function layOut(module: object, plan: ReducePlan, left: number, tapBytes: number, maskBytes: number, regions: number[]): { buffer: ArrayBuffer; kernel: SimdKernel; planAt: number; masksAt: number; at: number[] } {
  const { first, mask } = plan;
  const outWidth = first.length;
  const offsets: number[] = [];
  let end = 0;
  for (const size of [outWidth * 8, (TRANSFORM_SCALE + 1) * maskBytes, ...regions]) {
    const at = align(end);
    offsets.push(at);
    end = at + size;
  }
  const [planAt, masksAt, ...at] = offsets as [number, number, ...number[]];
  const { memory, kernels: kernel } = instanceFor(module, end);
  const buffer = memory.buffer;
  const planWords = new Int32Array(buffer, planAt, outWidth * 2);
  for (let x = 0; x < outWidth; x++) {
    planWords[x * 2] = (first[x]! + left) * tapBytes;
    planWords[x * 2 + 1] = masksAt + mask[x]! * maskBytes;
  }
  return { buffer, kernel, planAt, masksAt, at };
}

/** The SIMD output (`length` bytes at `outAt`): a view of the kernel's memory when `transient`, else a copy. */
function result(buffer: ArrayBuffer, outAt: number, length: number, transient: boolean): Buffer {
  countKernel('reduceHorizontal.simd');
  return transient ? Buffer.from(buffer, outAt, length) : Buffer.from(new Uint8Array(buffer, outAt, length));
}

/**
 * `src`'s rows (3 channels) into the module's memory at `srcAt`, `srcRow` bytes apart, each with
 * libvips's copied border: `left` copies of its first pixel before it and copies of its last
 * after it, to `rowPixels` pixels.
 */
function copyRowsWithBorder(bytes: Uint8Array, src: Uint8Array, width: number, height: number, srcAt: number, srcRow: number, left: number, rowPixels: number): void {
  const inRow = width * 3;
  for (let r = 0; r < height; r++) {
    const s = r * inRow;
    const d = srcAt + r * srcRow;
    bytes.set(src.subarray(s, s + inRow), d + left * 3);
    for (let k = 0; k < left; k++) bytes.copyWithin(d + k * 3, d + left * 3, d + left * 3 + 3);
    const lastAt = d + (left + width - 1) * 3;
    for (let k = left + width; k < rowPixels; k++) bytes.copyWithin(d + k * 3, lastAt, lastAt + 3);
  }
}
