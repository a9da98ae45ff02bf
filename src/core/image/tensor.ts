import { MIN_STRETCH_PEAK } from '../../models/prepared-tensors.js';
import { countKernel } from './kernel-calls.js';
import { upscaleMaskSimd } from './mask-upscale.js';
import type { PreprocessingProfile } from './profile.js';

/** A model's input: 8-bit pixels or normalised floats. */
export type InputTensor = Uint8Array | Float32Array;
/** A model's mask output: probabilities, or fixed point 0..255 / 0..65535. */
export type MaskTensor = Float32Array | Uint8Array | Uint16Array;

/** Bytes of the profile's input tensor at its size. */
export function tensorBytes(profile: PreprocessingProfile): number {
  return profile.width * profile.height * 3 * ((profile.inputDatatype ?? 'FP32') === 'UINT8' ? 1 : 4);
}

/**
 * Interleaved RGB bytes (HWC) at the model's size to the profile's input tensor. An 8-bit NHWC
 * model takes the decoder's bytes as they are: no per-pixel work, no copy. With `into` (the
 * tensor's place in a request message, tensorBytes() long, 4-byte aligned) the tensor is written
 * there instead of into memory of its own: an 8-bit NHWC tensor is then one copy of `rgb`.
 */
export function imageToTensor(rgb: Buffer, profile: PreprocessingProfile, into?: Uint8Array): InputTensor {
  countKernel('imageToTensor');
  const pixels = profile.width * profile.height;
  if (rgb.length !== pixels * 3) throw new Error(`expected ${pixels * 3} RGB bytes, got ${rgb.length}`);
  if (into && into.byteLength !== tensorBytes(profile)) throw new Error(`the tensor needs ${tensorBytes(profile)} bytes, its place has ${into.byteLength}`);
  const planar = (profile.inputLayout ?? 'NCHW') === 'NCHW';
  if ((profile.inputDatatype ?? 'FP32') === 'UINT8') {
    if (!planar) {
      if (!into) return new Uint8Array(rgb.buffer, rgb.byteOffset, rgb.byteLength);
      into.set(rgb);
      return into;
    }
    const tensor = into ?? new Uint8Array(pixels * 3);
    for (let c = 0; c < 3; c++) for (let i = 0, j = c; i < pixels; i++, j += 3) tensor[c * pixels + i] = rgb[j]!;
    return tensor;
  }
  const tensor = into ? new Float32Array(into.buffer, into.byteOffset, pixels * 3) : new Float32Array(pixels * 3);
  for (let c = 0; c < 3; c++) {
    // value = (px / 255 - mean) / std, folded into one multiply-add per element.
    const scale = 1 / (255 * profile.std[c]!);
    const offset = -profile.mean[c]! / profile.std[c]!;
    if (planar) {
      const plane = c * pixels;
      for (let i = 0, j = c; i < pixels; i++, j += 3) tensor[plane + i] = rgb[j]! * scale + offset;
    } else {
      for (let j = c; j < pixels * 3; j += 3) tensor[j] = rgb[j]! * scale + offset;
    }
  }
  return tensor;
}

/** Normalised planar FP32 (the layout of ISNet as shipped), kept for benchmarks and FP32 models. */
export function rgbToTensor(rgb: Buffer, profile: PreprocessingProfile): Float32Array {
  return imageToTensor(rgb, { ...profile, inputDatatype: 'FP32', inputLayout: 'NCHW' }) as Float32Array;
}

// The "found nothing" peak is a fact the inference server's preparation shares: src/models.
export { MIN_STRETCH_PEAK };

/**
 * A mask to 8-bit grey, optionally stretched to the full range first. Fixed-point masks count
 * as value / 255 (UINT8) or value / 65535 (UINT16); an 8-bit mask that needs no stretch is
 * used as it is, without a copy. `sigmoid`: the FP32 mask holds logits, made probabilities
 * first (as rembg does for BiRefNet, before its stretch).
 */
export function maskToGrey(mask: MaskTensor, minMaxNormalize: boolean, sigmoid = false): Buffer {
  if (sigmoid) {
    if (!(mask instanceof Float32Array)) throw new Error('sigmoid applies to FP32 masks only');
    const probabilities = new Float32Array(mask.length);
    for (let i = 0; i < mask.length; i++) probabilities[i] = 1 / (1 + Math.exp(-mask[i]!));
    mask = probabilities;
  }
  const unit = mask instanceof Uint8Array ? 255 : mask instanceof Uint16Array ? 65535 : 1;
  if (unit === 255 && !minMaxNormalize) return Buffer.from(mask.buffer, mask.byteOffset, mask.byteLength);
  let lo = 0;
  let hi = unit;
  if (minMaxNormalize) {
    lo = Infinity;
    hi = -Infinity;
    for (let i = 0; i < mask.length; i++) {
      const v = mask[i]!;
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
    // A flat map (no foreground anywhere, or all foreground) has nothing to stretch.
    if (!(hi - lo > 1e-6 * unit) || hi < MIN_STRETCH_PEAK * unit) {
      lo = 0;
      hi = unit;
    }
  }
  const grey = Buffer.allocUnsafe(mask.length);
  const scale = 255 / (hi - lo);
  for (let i = 0; i < mask.length; i++) {
    const v = (mask[i]! - lo) * scale;
    grey[i] = v <= 0 ? 0 : v >= 255 ? 255 : Math.round(v);
  }
  return grey;
}

/** Rows [top, bottom) of a full-size image: a band one thread works on. */
export interface RowRange {
  top: number;
  bottom: number;
}

/**
 * Bilinear upscale of a one-channel 8-bit image (the mask) to width x height, corners aligned,
 * in fixed point (weights in 1/256, rounded once at the end).
 *
 * Hand-written because it runs on every request at full output size, where a mask is mostly
 * flat: each output row is interpolated vertically once at the source's width, then
 * horizontally, and a stretch of equal source values is filled without arithmetic (one native fill
 * when long).
 * Bilinear weights are separable, so this is exactly (bit for bit) the four-tap formula at
 * several times its speed (sharp's resize, single-threaded on glibc Linux, is slower still and
 * centre-aligned).
 *
 * `rows`: only output rows [top, bottom) are written (into `into`, the whole width x height),
 * each as the whole upscale writes it: a row depends on its two source rows alone, so row bands
 * made by several threads make the same mask (render-bands.ts).
 */
export function upscaleMask(
  src: Buffer,
  srcWidth: number,
  srcHeight: number,
  width: number,
  height: number,
  into?: Buffer,
  /** `simd: false` keeps to the JavaScript loops (the reference); `rows`: only these output rows (see above). */
  options: { simd?: boolean; rows?: RowRange } = {},
): Buffer {
  const rows = options.rows;
  countKernel('upscaleMask');
  if (rows && !(Number.isInteger(rows.top) && Number.isInteger(rows.bottom) && rows.top >= 0 && rows.top <= rows.bottom && rows.bottom <= height)) {
    throw new RangeError(`upscaleMask: rows ${rows.top}..${rows.bottom} of ${height}`);
  }
  if (into && into.length !== width * height) throw new RangeError(`upscaleMask: ${into.length} bytes to write ${width}x${height} into`);
  // Every byte of `out` is written below (a borrowed buffer's old contents never show).
  const out = into ?? Buffer.allocUnsafe(width * height);
  const sx = width > 1 ? (srcWidth - 1) / (width - 1) : 0;
  const sy = height > 1 ? (srcHeight - 1) / (height - 1) : 0;
  // Per output column: its left source column and the right one's weight. Columns are in
  // source order, so the outputs between two source columns form one run.
  const x0 = new Int32Array(width);
  const wx = new Uint16Array(width);
  for (let x = 0; x < width; x++) {
    const fx = x * sx;
    x0[x] = Math.floor(fx);
    wx[x] = Math.round((fx - x0[x]!) * 256);
  }
  // The same bytes in WebAssembly SIMD where it applies (mask-upscale.ts); `simd: false` keeps to
  // the loops below, the reference the tests compare it with.
  if (options.simd !== false && upscaleMaskSimd(src, srcWidth, srcHeight, width, height, x0, wx, sy, out, rows)) return out;
  // The first output column whose left source column is k or more (width when none): where the
  // outputs of source columns k.. start.
  const firstColumn = new Int32Array(srcWidth + 1).fill(width);
  for (let x = width - 1; x >= 0; x--) firstColumn[x0[x]!] = x;
  for (let k = srcWidth - 1; k >= 0; k--) firstColumn[k] = Math.min(firstColumn[k]!, firstColumn[k + 1]!);
  // One source row interpolated vertically, in 1/256 (at most 255 * 256).
  const line = new Uint32Array(srcWidth + 1);
  // Per source column k with line[k] === line[k + 1]: the last column K of that flat stretch
  // (line[k..K + 1] all equal), so every output between them is filled at once.
  const flatUntil = new Int32Array(srcWidth);
  for (let y = rows?.top ?? 0, last = rows?.bottom ?? height; y < last; y++) {
    const fy = y * sy;
    const top = Math.floor(fy);
    const r0 = top * srcWidth;
    const r1 = Math.min(srcHeight - 1, top + 1) * srcWidth;
    const wy = Math.round((fy - top) * 256);
    let flat = true;
    for (let k = 0; k < srcWidth; k++) {
      const v = src[r0 + k]! * (256 - wy) + src[r1 + k]! * wy;
      line[k] = v;
      if (v !== line[0]) flat = false;
    }
    // The last column's right neighbour is itself (clamped at the border).
    line[srcWidth] = line[srcWidth - 1]!;
    const row = y * width;
    if (flat) {
      out.fill((line[0]! * 256 + 32768) >>> 16, row, row + width);
      continue;
    }
    for (let k = srcWidth - 1; k >= 0; k--) {
      flatUntil[k] = line[k] !== line[k + 1] ? -1 : k + 1 < srcWidth && line[k + 1] === line[k + 2] ? flatUntil[k + 1]! : k;
    }
    let x = 0;
    while (x < width) {
      const k = x0[x]!;
      const a = line[k]!;
      const b = line[k + 1]!;
      if (a === b) {
        const v = (a * 256 + 32768) >>> 16;
        const end = firstColumn[flatUntil[k]! + 1]!;
        // Short stretches by hand, long ones with one native fill.
        if (end - x < 16) while (x < end) out[row + x++] = v;
        else {
          out.fill(v, row + x, row + end);
          x = end;
        }
      } else {
        do {
          const w = wx[x]!;
          out[row + x++] = (a * (256 - w) + b * w + 32768) >>> 16;
        } while (x < width && x0[x] === k);
      }
    }
  }
  return out;
}
