/**
 * foreground.ts's blur-fusion loops in WebAssembly SIMD (foreground-blur.wat): the same floats,
 * bit for bit, two per instruction. The planes an estimate works on live in this module's
 * memory (kept per thread, like the JavaScript's plane arena it stands in for), so the
 * JavaScript parts of the estimate (the planes' fill, the sparse second pass, the per-pixel
 * correction) read and write them as Float32Arrays and the kernels take their offsets.
 */
import { FOREGROUND_BLUR_WASM } from './foreground-blur-wasm.js';
import { compiledOnce, grownInstance } from './simd-module.js';

/** The few WebAssembly calls used here (the project's TypeScript libs declare none). */

/** The kernels, on byte offsets into the arena's memory (foreground-blur.wat documents each). */
export interface BlurKernels {
  blurRows(src: number, dst: number, w: number, h: number, radius: number): void;
  blurColumns(tmp: number, out: number, columns: number, w: number, h: number, radius: number): void;
  inverses(blurredA: number, invA: number, invB: number, n: number): void;
  weightByAlpha(f: number, a: number, out: number, n: number): void;
  weightByRest(b: number, a: number, out: number, n: number): void;
  foreground(bf: number, bb: number, invA: number, invB: number, a: number, ic: number, n: number): void;
  divideOut(bf: number, bb: number, invA: number, invB: number, n: number): void;
  softList(alpha: number, count: number, list: number): number;
  secondAtList(ctx: number, list: number, k: number, width: number, left: number, rows: number, cols: number): void;
  secondAtPoints(ctx: number, list: number, k: number): void;
  correctList(list: number, k: number, width: number, left: number, rows: number, cols: number, alpha: number, vals: number, F0: number, F1: number, F2: number, B0: number, B1: number, B2: number): void;
}

/** Planes in the module's memory, handed out in order (foreground.ts's PlaneArena). */
export interface SimdPlanes {
  plane(): Float32Array;
  tmp: Float32Array;
  columns: Float64Array;
  kernels: BlurKernels;
  /** `extraBytes` of the memory past the planes (16-byte aligned), and a byte view of it all. */
  extra: { at: number; bytes: Uint8Array };
}

const simdModule = compiledOnce(FOREGROUND_BLUR_WASM);

/** Whether this thread can run the SIMD blur fusion. */
export function blursWithSimd(): boolean {
  return simdModule() !== null;
}

/** One instance per thread, its memory kept and grown as needed. */
const instance = grownInstance<BlurKernels>();

/**
 * `count` planes of n floats (each with room for one more, 16-byte aligned: the kernels go two
 * values at a time), the box blur's intermediate plane, w + 2 column sums and `extraBytes`, all in the kept
 * memory (grown when too small); null where WebAssembly SIMD is missing. Contents undefined.
 */
export function simdPlanes(n: number, w: number, count: number, extraBytes = 0): SimdPlanes | null {
  const module = simdModule();
  if (!module) return null;
  const stride = ((n + 1) * 4 + 15) & ~15;
  const columnsAt = (count + 1) * stride;
  const extraAt = (columnsAt + (w + 2) * 8 + 15) & ~15;
  const bytes = extraAt + extraBytes;
  const kept = instance(module, bytes);
  // Views made after any growth (growing detaches the old buffer).
  const buffer = kept.memory.buffer;
  let next = 0;
  return {
    plane: () => {
      if (next >= count) throw new Error(`simdPlanes: more than ${count} planes asked for`);
      return new Float32Array(buffer, stride * next++, n);
    },
    tmp: new Float32Array(buffer, count * stride, n),
    columns: new Float64Array(buffer, columnsAt, w),
    kernels: kept.kernels,
    extra: { at: extraAt, bytes: new Uint8Array(buffer) },
  };
}
