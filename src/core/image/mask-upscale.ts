/**
 * upscaleMask's loops (tensor.ts) in WebAssembly SIMD (mask-upscale.wat), byte for byte the same:
 * the mask's bilinear resize to the full size is integer arithmetic, so the order of its two
 * passes does not change a value, and 8 or 16 samples go per instruction. A 1 MP cutout's
 * mask took 4-7 ms of the pixel worker's CPU in the JavaScript loops (tensor.ts keeps them, as
 * the reference and for what this does not take).
 *
 * Taken: outputs at least 16 wide whose every 8 consecutive columns read at most 16 consecutive
 * source bytes (an upscale, or a downscale by less than about 2 along x: every photo's mask from
 * the model's 1024x1024 but the smallest). The caller falls back to JavaScript otherwise, and where
 * WebAssembly SIMD is missing.
 */
import { countKernel } from './kernel-calls.js';
import { MASK_UPSCALE_WASM } from './mask-upscale-wasm.js';
import { align, compiledOnce, grownInstance } from './simd-module.js';

/** The few WebAssembly calls used here (the project's TypeScript libs declare none). */

interface Kernels {
  alongX(src: number, dst: number, plan: number, groups: number): void;
  alongY(row0: number, row1: number, out: number, width: number, wy: number): void;
}

/** Compiled once per thread; null where WebAssembly SIMD is missing. */
const simdModule = compiledOnce(MASK_UPSCALE_WASM);

/** Whether this thread can run the SIMD upscale. */
export function upscalesWithSimd(): boolean {
  return simdModule() !== null;
}

/**
 * Output rows are made in bands of about this many bytes in the module's memory and copied out:
 * the memory stays about the source mask's size (1 MiB for the model's) whatever the output's.
 */
const BAND_BYTES = 256 << 10;
/** One instance per thread, its memory kept and grown as needed (a fresh one costs page faults). */
const instance = grownInstance<Kernels>();

/** alongX's plan: bytes per step of 8 output columns (mask-upscale.wat describes the layout). */
const STEP_BYTES = 64;

/**
 * `src` (srcWidth x srcHeight) resized to width x height into `out`, as upscaleMask's
 * JavaScript does it, given its per-column taps (`x0`: left source column; `wx`: the right one's
 * weight in 1/256). Returns false, writing nothing, where the SIMD path does not apply.
 */
export function upscaleMaskSimd(
  src: Uint8Array,
  srcWidth: number,
  srcHeight: number,
  width: number,
  height: number,
  x0: Int32Array,
  wx: Uint16Array,
  sy: number,
  out: Uint8Array,
  /** Only output rows [top, bottom) (a band of a split render: render-bands.ts); all by default. */
  rows: { top: number; bottom: number } = { top: 0, bottom: height },
): boolean {
  if (width < 16) return false;
  const module = simdModule();
  if (!module) return false;
  const groups = Math.ceil(width / 8);
  // Every step's taps must lie in the 16 bytes from its first left tap.
  for (let g = 0; g < groups; g++) {
    const start = Math.min(g * 8, width - 8);
    if (Math.min(srcWidth - 1, x0[start + 7]! + 1) - x0[start]! > 15) return false;
  }
  const planAt = 0;
  const srcAt = align(groups * STEP_BYTES);
  const rowAt = [align(srcAt + src.length + 16), 0];
  rowAt[1] = align(rowAt[0]! + width * 2);
  const bandAt = align(rowAt[1]! + width * 2);
  const bandRows = Math.max(1, Math.min(height, Math.floor(BAND_BYTES / width)));
  const { memory, kernels } = instance(module, bandAt + bandRows * width);
  const buffer = memory.buffer;
  const plan = new DataView(buffer, planAt, groups * STEP_BYTES);
  const bytes = new Uint8Array(buffer);
  for (let g = 0; g < groups; g++) {
    const start = Math.min(g * 8, width - 8);
    const base = x0[start]!;
    const at = g * STEP_BYTES;
    plan.setInt32(at, start, true);
    plan.setInt32(at + 4, base, true);
    for (let j = 0; j < 8; j++) {
      const left = x0[start + j]!;
      bytes[planAt + at + 16 + 2 * j] = left - base;
      bytes[planAt + at + 16 + 2 * j + 1] = 0x80;
      bytes[planAt + at + 32 + 2 * j] = Math.min(srcWidth - 1, left + 1) - base;
      bytes[planAt + at + 32 + 2 * j + 1] = 0x80;
      plan.setUint16(at + 48 + 2 * j, wx[start + j]!, true);
    }
  }
  bytes.set(src, srcAt);
  // Which source row each x-passed row holds (-1: none yet).
  const holds = [-1, -1];
  const rowFor = (r: number, keep: number): number => {
    if (holds[0] === r) return rowAt[0]!;
    if (holds[1] === r) return rowAt[1]!;
    const slot = holds[0] === keep ? 1 : 0;
    kernels.alongX(srcAt + r * srcWidth, rowAt[slot]!, planAt, groups);
    holds[slot] = r;
    return rowAt[slot]!;
  };
  for (let y0 = rows.top; y0 < rows.bottom; y0 += bandRows) {
    const count = Math.min(bandRows, rows.bottom - y0);
    for (let i = 0; i < count; i++) {
      const fy = (y0 + i) * sy;
      const top = Math.floor(fy);
      const bottom = Math.min(srcHeight - 1, top + 1);
      const wy = Math.round((fy - top) * 256);
      const row0 = rowFor(top, bottom);
      const row1 = rowFor(bottom, top);
      kernels.alongY(row0, row1, bandAt + i * width, width, wy);
    }
    out.set(bytes.subarray(bandAt, bandAt + count * width), y0 * width);
  }
  countKernel('upscaleMask.simd');
  return true;
}
