import { simdPlanes, type BlurKernels } from './foreground-blur.js';
import { countKernel } from './kernel-calls.js';
import { alphaBoxSimd } from './render-compose.js';
import type { RowRange } from './tensor.js';

/**
 * Foreground colour estimation for soft edges (hair, fur, motion blur, glass). A pixel with
 * alpha between 0 and 1 is a mix I = aF + (1-a)B of the object's colour F and the old background
 * B; showing I as the cutout's colour carries B into the result (a halo on a new background).
 * This recovers F by blur fusion (Forte & Pitie, "Approximate Fast Foreground Colour Estimation",
 * ICIP 2021): two passes of box-blurred, alpha-weighted estimates of F and B (box sizes 90, then
 * 6, for a 1000-pixel image), then a per-pixel correction. Only pixels with 0 < alpha < 255 change.
 *
 * The blurred estimates are smooth, so they are computed at a working size of at most
 * WORKING_PIXELS and sampled bilinearly at the soft pixels: time and memory stay flat however
 * large the image is.
 */
const WORKING_PIXELS = 60_000;

/** An image and its alpha at some size: the full one, or a smaller view of the same picture. */
export interface ImageView {
  rgb: Buffer;
  alpha: Buffer;
  width: number;
  height: number;
}

/**
 * The view at the working size the estimates are made at, for an image of width x height: the
 * view itself when it is that size already. A request waiting to render can keep this (about
 * 0.2 MB) instead of the model-size view (4 MB), with the same result.
 */
export async function workingView(from: ImageView, width: number, height: number): Promise<ImageView> {
  const { w, h } = workingSize(from, width, height);
  if (w === from.width && h === from.height) return from;
  return { rgb: sampleView(from.rgb, from.width, from.height, 3, w, h), alpha: sampleView(from.alpha, from.width, from.height, 1, w, h), width: w, height: h };
}

/** The working size workingView gives for `from`, a view of a width x height image. */
function workingSize(from: { width: number; height: number }, width: number, height: number): { w: number; h: number } {
  const scale = Math.min(1, Math.sqrt(WORKING_PIXELS / (from.width * from.height)));
  // Working size: the image's aspect, even when the source itself is stretched (model input).
  const w = Math.max(1, Math.round(scale === 1 ? from.width : Math.sqrt(WORKING_PIXELS * (width / height))));
  const h = Math.max(1, Math.round(scale === 1 ? from.height : Math.sqrt(WORKING_PIXELS * (height / width))));
  return { w, h };
}

/** v / 255 for each byte v: what the planes hold (each rounded to a float as it is stored). */
const UNIT = Float64Array.from({ length: 256 }, (_, v) => v / 255);

/**
 * The planes (colour and alpha in 0..1) of the working view of `from` over `box`, written
 * straight from `from`: sampled as sampleView samples it when `from` is larger than the working
 * size (w x h), read as it is otherwise. The same values as sampling the whole view into bytes and
 * converting the box, without the two byte buffers.
 */
function fillPlanes(from: ImageView, w: number, h: number, box: { left: number; top: number; width: number; height: number }, image: Float32Array[], a: Float32Array): void {
  const [p0, p1, p2] = image as [Float32Array, Float32Array, Float32Array];
  const { rgb, alpha } = from;
  const cw = box.width;
  if (w === from.width && h === from.height) {
    for (let y = 0; y < box.height; y++) {
      const row = (box.top + y) * w + box.left;
      const to = y * cw;
      for (let x = 0; x < cw; x++) {
        const s = row + x;
        p0[to + x] = UNIT[rgb[s * 3]!]!;
        p1[to + x] = UNIT[rgb[s * 3 + 1]!]!;
        p2[to + x] = UNIT[rgb[s * 3 + 2]!]!;
        a[to + x] = UNIT[alpha[s]!]!;
      }
    }
    return;
  }
  const sw = from.width;
  const sh = from.height;
  // sampleView's taps for the box's columns: the left source column, and the right one (clamped).
  const left = new Int32Array(cw);
  const right = new Int32Array(cw);
  for (let x = 0; x < cw; x++) {
    const cx = Math.min(sw - 1, Math.max(0, Math.floor(((box.left + x + 0.5) * sw) / w - 0.5)));
    left[x] = cx;
    right[x] = Math.min(sw - 1, cx + 1);
  }
  for (let y = 0; y < box.height; y++) {
    const cy = Math.min(sh - 1, Math.max(0, Math.floor(((box.top + y + 0.5) * sh) / h - 0.5)));
    const top = cy * sw;
    const bottom = Math.min(sh - 1, cy + 1) * sw;
    const to = y * cw;
    for (let x = 0; x < cw; x++) {
      const tl = top + left[x]!;
      const tr = top + right[x]!;
      const bl = bottom + left[x]!;
      const br = bottom + right[x]!;
      p0[to + x] = UNIT[(rgb[tl * 3]! + rgb[tr * 3]! + rgb[bl * 3]! + rgb[br * 3]! + 2) >> 2]!;
      p1[to + x] = UNIT[(rgb[tl * 3 + 1]! + rgb[tr * 3 + 1]! + rgb[bl * 3 + 1]! + rgb[br * 3 + 1]! + 2) >> 2]!;
      p2[to + x] = UNIT[(rgb[tl * 3 + 2]! + rgb[tr * 3 + 2]! + rgb[bl * 3 + 2]! + rgb[br * 3 + 2]! + 2) >> 2]!;
      a[to + x] = UNIT[(alpha[tl]! + alpha[tr]! + alpha[bl]! + alpha[br]! + 2) >> 2]!;
    }
  }
}

/**
 * Interleaved 8-bit pixels at w x h, each output the mean of the 2 x 2 source pixels around its
 * centre. Not an area average: the estimates made from it are box-blurred over several working
 * pixels, which removes the aliasing a 2 x 2 sample leaves, and it reads 4 source pixels per
 * output where a resize reads them all: two sharp resizes of the 4 MB model-size view cost ~12 ms
 * of CPU per request (mostly per-call cost), this ~1 ms.
 */
export function sampleView(src: Buffer, sw: number, sh: number, channels: 1 | 3, w: number, h: number): Buffer {
  const out = Buffer.allocUnsafe(w * h * channels);
  // Per output column: its left source column (the right one is the next, clamped).
  const left = new Int32Array(w);
  const right = new Int32Array(w);
  for (let x = 0; x < w; x++) {
    const cx = Math.min(sw - 1, Math.max(0, Math.floor(((x + 0.5) * sw) / w - 0.5)));
    left[x] = cx * channels;
    right[x] = Math.min(sw - 1, cx + 1) * channels;
  }
  for (let y = 0; y < h; y++) {
    const cy = Math.min(sh - 1, Math.max(0, Math.floor(((y + 0.5) * sh) / h - 0.5)));
    const top = cy * sw * channels;
    const bottom = Math.min(sh - 1, cy + 1) * sw * channels;
    let o = y * w * channels;
    for (let x = 0; x < w; x++) {
      const l = left[x]!;
      const r = right[x]!;
      for (let c = 0; c < channels; c++, o++) out[o] = (src[top + l + c]! + src[top + r + c]! + src[bottom + l + c]! + src[bottom + r + c]! + 2) >> 2;
    }
  }
  return out;
}

/**
 * Rewrites `rgb` in place at soft pixels with the estimated foreground colour, and returns it.
 * `source` (optional) is a smaller view of the same picture to compute the blurred estimates
 * from, sparing a downscale of a large image.
 *
 * `region`: the blurred estimates are needed only where soft pixels sample them, so by default
 * (`band`) they are computed on the working-size box around the soft pixels, widened by both
 * passes' blur radii: every estimate inside the box is the one `whole` (the whole working
 * image, the reference) makes, and the box is all the correction reads.
 *
 * `rows`: only the soft pixels of full-size rows [top, bottom) are corrected (the rest of `rgb`
 * is not touched), each exactly as the whole image's estimate corrects it: the box is then the
 * one around that band's soft pixels, and every estimate in it is `whole`'s. Row bands corrected
 * by several threads make the same image (render-bands.ts).
 */
export async function estimateForeground(
  rgb: Buffer,
  alpha: Buffer,
  width: number,
  height: number,
  source?: ImageView,
  region: 'band' | 'whole' = 'band',
  /**
   * `simd: false` keeps to the JavaScript loops (the reference the tests compare with). `rows`:
   * only full-size rows [top, bottom) are corrected (see above).
   */
  options: { simd?: boolean; rows?: RowRange } = {},
): Promise<Buffer> {
  countKernel('estimateForeground');
  // Only soft pixels change: a hard mask (or an empty one) needs no estimate at all.
  const soft = softBounds(alpha, width, height, options.rows, { simd: options.simd });
  if (!soft) return rgb;
  // The working view is not made: its planes are sampled from `from` straight (fillPlanes).
  const from = source ?? { rgb, alpha, width, height };
  const { w, h } = workingSize(from, width, height);

  // Blur sizes follow the whole working image (box sizes 90, then 6, per 1000 pixels).
  const unit = Math.max(w, h) / 1000;
  const firstSize = Math.max(3, Math.round(90 * unit));
  const secondSize = Math.max(3, Math.round(6 * unit));
  // Full-size pixel (x, y) samples the working size at (x * sx, y * sy) and its right and lower
  // neighbours.
  const sx = (w - 1) / Math.max(1, width - 1);
  const sy = (h - 1) / Math.max(1, height - 1);

  // The box the estimates are computed on: the working pixels the soft ones sample, widened by
  // the second pass's radius (its inputs) and the first's (theirs), clipped to the image. A box
  // blur (clipped at the image's borders) at a pixel whose whole box lies inside the crop gives
  // what it gives on the whole image.
  let box = { left: 0, top: 0, width: w, height: h };
  if (region === 'band') {
    const margin = (firstSize >> 1) + (secondSize >> 1);
    const left = Math.max(0, Math.floor(soft.left * sx) - margin);
    const top = Math.max(0, Math.floor(soft.top * sy) - margin);
    const right = Math.min(w - 1, Math.floor(soft.right * sx) + 1 + margin);
    const bottom = Math.min(h - 1, Math.floor(soft.bottom * sy) + 1 + margin);
    box = { left, top, width: right - left + 1, height: bottom - top + 1 };
  }
  const cw = box.width;
  const ch = box.height;
  const n = cw * ch;
  // The planes in WebAssembly memory where the SIMD blur fusion runs (foreground-blur.ts: the
  // same floats), else in the kept JavaScript arrays; `simd: false` keeps to the JavaScript.
  // The correction's bands of full-size rows (correctInBands) take memory of their own there.
  const bandRows = Math.max(1, Math.min(soft.bottom - soft.top + 1, Math.floor(BAND_PIXELS / width)));
  const cols = soft.right - soft.left + 1;
  const arena = (options.simd !== false && simdPlanes(n, cw, MAX_PLANES, CONTEXT_BYTES + n + 16 + cols * 16 + bandRows * (16 + width * 8))) || planeArena(n, cw);
  if (arena.kernels) countKernel('estimateForeground.simd');

  // Planar floats in 0..1: one plane per channel keeps every blur loop a straight walk.
  const image = [arena.plane(), arena.plane(), arena.plane()];
  const a = arena.plane();
  fillPlanes(from, w, h, box, image, a);

  const first = blurFusion(image, image, image, a, cw, ch, firstSize, 'foreground', arena);
  // The second pass's estimates are read only at the working pixels the soft pixels sample (a
  // thin band along the outline): with a small blur they are computed there alone (secondAt),
  // each as the whole-plane pass computes it; `whole` (the reference) computes every pixel.
  const sparse = region === 'band' && secondSize >> 1 <= SPARSE_MAX_RADIUS;
  const second = sparse
    ? sparseSecondPass(first.foreground, first.blurredBackground, a, cw, ch, secondSize, arena)
    : blurFusion(image, first.foreground, first.blurredBackground, a, cw, ch, secondSize, 'blurred', arena);

  // The final per-pixel correction, at full size and only where alpha is soft, samples the
  // smooth blurred estimates bilinearly from the working size (in the box's coordinates).
  const [F0, F1, F2] = second.blurredForeground as [Float32Array, Float32Array, Float32Array];
  const [B0, B1, B2] = second.blurredBackground as [Float32Array, Float32Array, Float32Array];
  const out = rgb;
  // Per full-size column of the soft box: its left tap's column in the box and its weight.
  const tapX = new Int32Array(cols);
  const tapRight = new Int32Array(cols);
  const weightX = new Float64Array(cols);
  for (let x = soft.left; x <= soft.right; x++) {
    const fx = x * sx;
    const x0 = Math.floor(fx);
    tapX[x - soft.left] = x0 - box.left;
    tapRight[x - soft.left] = Math.min(w - 1, x0 + 1) - box.left;
    weightX[x - soft.left] = fx - x0;
  }
  // With the sparse pass, a point's estimates are made the first time a soft pixel reads them.
  const lazy = second.done ? (second as SparseSecond) : undefined;
  const done = second.done;
  if (arena.kernels && arena.extra) {
    correctInBands({ rgb: out, alpha, width, soft, box, w, h, sy, tapX, tapRight, weightX, lazy, bandRows, F: [F0, F1, F2], B: [B0, B1, B2] }, arena.kernels, arena.extra);
    return out;
  }
  // Opaque and transparent pixels keep their colour: four of them are skipped at a time.
  const words = alpha.byteOffset % 4 === 0 ? new Uint32Array(alpha.buffer, alpha.byteOffset, alpha.length >> 2) : undefined;
  for (let y = soft.top; y <= soft.bottom; y++) {
    const fy = y * sy;
    const y0 = Math.floor(fy);
    const y1 = Math.min(h - 1, y0 + 1);
    const ty = fy - y0;
    const r0 = (y0 - box.top) * cw;
    const r1 = (y1 - box.top) * cw;
    const rowStart = y * width;
    const end = rowStart + soft.right + 1;
    for (let i = rowStart + soft.left; i < end; i++) {
      if (words && (i & 3) === 0 && i + 4 <= end) {
        const word = words[i >> 2]!;
        if (word === 0 || word === 0xffffffff) {
          i += 3;
          continue;
        }
      }
      const ai = alpha[i]!;
      if (ai === 0 || ai === 255) continue;
      const k = i - rowStart - soft.left;
      const x0 = tapX[k]!;
      const x1 = tapRight[k]!;
      const tx = weightX[k]!;
      const p00 = r0 + x0;
      const p01 = r0 + x1;
      const p10 = r1 + x0;
      const p11 = r1 + x1;
      if (lazy && done) {
        if (done[p00] === 0) secondAt(lazy, p00);
        if (done[p01] === 0) secondAt(lazy, p01);
        if (done[p10] === 0) secondAt(lazy, p10);
        if (done[p11] === 0) secondAt(lazy, p11);
      }
      const w00 = (1 - tx) * (1 - ty);
      const w01 = tx * (1 - ty);
      const w10 = (1 - tx) * ty;
      const w11 = tx * ty;
      const al = ai / 255;
      const j = i * 3;
      out[j] = correct(out[j]!, al, F0, B0, p00, p01, p10, p11, w00, w01, w10, w11);
      out[j + 1] = correct(out[j + 1]!, al, F1, B1, p00, p01, p10, p11, w00, w01, w10, w11);
      out[j + 2] = correct(out[j + 2]!, al, F2, B2, p00, p01, p10, p11, w00, w01, w10, w11);
    }
  }
  return out;
}

/** Full-size pixels per band of the SIMD correction (correctInBands): its memory is about 8 bytes each. */
const BAND_PIXELS = 65_536;
/** secondAt's context block for the SIMD kernels (foreground-blur.wat), first in the extra memory. */
const CONTEXT_BYTES = 128;

/**
 * estimateForeground's final loop with the WebAssembly kernels (foreground-blur.wat), the same
 * bytes: band by band of full-size rows, the alpha is copied into the module's memory, `softList`
 * lists its soft pixels (16 bytes per test where they are opaque or transparent), the sparse second
 * pass is made at the points they read (secondAt, in JavaScript), their colour is gathered,
 * `correctList` corrects it there (the JavaScript's `correct`, in double, in its order) and it is
 * put back.
 */
function correctInBands(
  job: {
    rgb: Buffer;
    alpha: Buffer;
    width: number;
    soft: { left: number; top: number; right: number; bottom: number };
    box: { left: number; top: number; width: number; height: number };
    w: number;
    h: number;
    sy: number;
    tapX: Int32Array;
    tapRight: Int32Array;
    weightX: Float64Array;
    lazy: SparseSecond | undefined;
    bandRows: number;
    F: Float32Array[];
    B: Float32Array[];
  },
  kernels: BlurKernels,
  extra: { at: number; bytes: Uint8Array },
): void {
  const { rgb, alpha, width, soft, box, h, sy, tapX, tapRight, weightX, lazy, bandRows } = job;
  const cw = box.width;
  const cols = soft.right - soft.left + 1;
  const { bytes } = extra;
  const memory = bytes.buffer;
  // [secondAt's context | done flags (n) | column taps (16 bytes each) | row taps (16 each) | alpha band |
  //  soft list (i32) | colours (3 bytes each)]
  const ctxAt = extra.at;
  if (lazy) writeContext(lazy, extra);
  const colsAt = (ctxAt + CONTEXT_BYTES + box.width * box.height + 15) & ~15;
  const rowsAt = colsAt + cols * 16;
  const alphaAt = rowsAt + bandRows * 16;
  const listAt = (alphaAt + bandRows * width + 3) & ~3;
  const valsAt = listAt + bandRows * width * 4;
  const colInts = new Int32Array(memory, colsAt, cols * 4);
  const colFloats = new Float64Array(memory, colsAt, cols * 2);
  for (let k = 0; k < cols; k++) {
    colInts[k * 4] = tapX[k]!;
    colInts[k * 4 + 1] = tapRight[k]!;
    colFloats[k * 2 + 1] = weightX[k]!;
  }
  const rowInts = new Int32Array(memory, rowsAt, bandRows * 4);
  const rowFloats = new Float64Array(memory, rowsAt, bandRows * 2);
  const list = new Int32Array(memory, listAt, bandRows * width);
  const [F0, F1, F2] = job.F.map((p) => p.byteOffset) as [number, number, number];
  const [B0, B1, B2] = job.B.map((p) => p.byteOffset) as [number, number, number];
  for (let top = soft.top; top <= soft.bottom; top += bandRows) {
    const rows = Math.min(bandRows, soft.bottom + 1 - top);
    bytes.set(alpha.subarray(top * width, (top + rows) * width), alphaAt);
    const count = kernels.softList(alphaAt, rows * width, listAt);
    if (count === 0) continue;
    for (let i = 0; i < rows; i++) {
      const fy = (top + i) * sy;
      const y0 = Math.floor(fy);
      rowInts[i * 4] = (y0 - box.top) * cw;
      rowInts[i * 4 + 1] = (Math.min(h - 1, y0 + 1) - box.top) * cw;
      rowFloats[i * 2 + 1] = fy - y0;
    }
    // The sparse second pass at the points the listed pixels read, then their colour gathered.
    if (lazy) kernels.secondAtList(ctxAt, listAt, count, width, soft.left, rowsAt, colsAt);
    const base = top * width;
    for (let j = 0, v = valsAt; j < count; j++, v += 3) {
      const o = (base + list[j]!) * 3;
      bytes[v] = rgb[o]!;
      bytes[v + 1] = rgb[o + 1]!;
      bytes[v + 2] = rgb[o + 2]!;
    }
    kernels.correctList(listAt, count, width, soft.left, rowsAt, colsAt, alphaAt, valsAt, F0, F1, F2, B0, B1, B2);
    for (let j = 0, v = valsAt; j < count; j++, v += 3) {
      const o = (base + list[j]!) * 3;
      rgb[o] = bytes[v]!;
      rgb[o + 1] = bytes[v + 1]!;
      rgb[o + 2] = bytes[v + 2]!;
    }
  }
}

/** secondAt's context block for the SIMD kernels (foreground-blur.wat's $secondAt reads it). */
function writeContext(lazy: SparseSecond, extra: { at: number; bytes: Uint8Array }): void {
  const context = new Int32Array(extra.bytes.buffer, extra.at, 17);
  const planes = [...lazy.f, ...lazy.b, lazy.a, ...lazy.blurredForeground, ...lazy.blurredBackground];
  planes.forEach((plane, i) => (context[i] = plane.byteOffset));
  context[13] = lazy.done.byteOffset;
  context[14] = lazy.w;
  context[15] = lazy.h;
  context[16] = lazy.radius;
}

/**
 * The sparse second pass at the given points over copies of the given planes (w x h each), in
 * WebAssembly SIMD or in JavaScript (secondAt), and copies of its six planes (0 where no point
 * was made). Exported for the tests, which compare the two bit for bit.
 */
export function sparseSecondPlanes(planes: { f: Float32Array[]; b: Float32Array[]; a: Float32Array }, w: number, h: number, size: number, points: number[], simd: boolean): Float32Array[] {
  const n = w * h;
  const arena = simd ? simdPlanes(n, w, MAX_PLANES, CONTEXT_BYTES + n + 16 + points.length * 4) : planeArena(n, w);
  if (!arena) throw new Error('WebAssembly SIMD is missing');
  const copy = (from: Float32Array) => {
    const plane = arena.plane();
    plane.set(from.subarray(0, n));
    return plane;
  };
  const lazy = sparseSecondPass(planes.f.map(copy), planes.b.map(copy), copy(planes.a), w, h, size, arena);
  const made = [...lazy.blurredForeground, ...lazy.blurredBackground];
  for (const plane of made) plane.fill(0);
  if (arena.kernels && arena.extra) {
    writeContext(lazy, arena.extra);
    const listAt = (arena.extra.at + CONTEXT_BYTES + n + 15) & ~15;
    new Int32Array(arena.extra.bytes.buffer, listAt, points.length).set(points);
    arena.kernels.secondAtPoints(arena.extra.at, listAt, points.length);
  } else for (const p of points) if (lazy.done[p] === 0) secondAt(lazy, p);
  return made.map((plane) => plane.slice());
}

/**
 * One channel of the final correction at a soft pixel: the blurred foreground and background
 * sampled bilinearly (taps p.., weights w..), then F = Fb + a (I - a Fb - (1 - a) Bb), in 0..255.
 */
function correct(
  value: number,
  al: number,
  F: Float32Array,
  B: Float32Array,
  p00: number,
  p01: number,
  p10: number,
  p11: number,
  w00: number,
  w01: number,
  w10: number,
  w11: number,
): number {
  const fb = 255 * (F[p00]! * w00 + F[p01]! * w01 + F[p10]! * w10 + F[p11]! * w11);
  const bg = 255 * (B[p00]! * w00 + B[p01]! * w01 + B[p10]! * w10 + B[p11]! * w11);
  const f = fb + al * (value - al * fb - (1 - al) * bg);
  return f <= 0 ? 0 : f >= 255 ? 255 : Math.round(f);
}

/**
 * Largest second-pass blur radius computed point by point (sparseSecondPass): each point reads
 * (2r + 1)^2 values of 7 planes, which beats whole-plane running sums while the soft band is
 * thin. The working size makes the second blur 3 wide (radius 1) but for extreme aspect ratios.
 */
const SPARSE_MAX_RADIUS = 3;

/** The second pass's results, computed on demand at the points the correction reads. */
interface SparseSecond {
  blurredForeground: Float32Array[];
  blurredBackground: Float32Array[];
  /** 1 where the point's estimates are in the planes. */
  done: Uint8Array;
  /** The first pass's foreground and blurred background, and the alpha plane: the inputs. */
  f: Float32Array[];
  b: Float32Array[];
  a: Float32Array;
  w: number;
  h: number;
  radius: number;
}

/** blurFusion's second pass (`keep: 'blurred'`), to be computed point by point by secondAt. */
function sparseSecondPass(f: Float32Array[], b: Float32Array[], a: Float32Array, w: number, h: number, size: number, arena: PlaneArena): SparseSecond {
  const n = w * h;
  // With the SIMD kernels, in their memory (after secondAt's context block: correctInBands).
  let done: Uint8Array;
  if (arena.extra) done = new Uint8Array(arena.extra.bytes.buffer, arena.extra.at + CONTEXT_BYTES, n);
  else {
    if (kept.done.length < n) kept.done = new Uint8Array(n);
    done = kept.done.subarray(0, n);
  }
  done.fill(0);
  return {
    blurredForeground: [arena.plane(), arena.plane(), arena.plane()],
    blurredBackground: [arena.plane(), arena.plane(), arena.plane()],
    done,
    f,
    b,
    a,
    w,
    h,
    radius: size >> 1,
  };
}

/**
 * The second pass's blurred foreground and background at one point p, as blurFusion's
 * whole-plane pass computes them: the box mean of each row (its running sum divided by the
 * count at the row's ends, times 1 / size between, rounded to a float), the mean of those row
 * means over the box's rows (times 1 / count, rounded), then the same divisions. The sums add
 * the same floats in another order, so a result can differ from the running sums' in a double's
 * last bit only, before it is rounded to a float.
 */
function secondAt(s: SparseSecond, p: number): void {
  const { f, b, a, w, h, radius } = s;
  const px = p % w;
  const py = (p - px) / w;
  const x0 = Math.max(0, px - radius);
  const x1 = Math.min(w - 1, px + radius);
  const y0 = Math.max(0, py - radius);
  const y1 = Math.min(h - 1, py + radius);
  // blurRow's three parts: the box grows over [0, head), is full over [head, tail), shrinks after.
  const head = Math.min(w, radius + 1);
  const tail = Math.max(head, w - radius);
  const full = px >= head && px < tail;
  const inv = 1 / (2 * radius + 1);
  const count = x1 - x0 + 1;
  let sa = 0;
  let sf0 = 0;
  let sf1 = 0;
  let sf2 = 0;
  let sb0 = 0;
  let sb1 = 0;
  let sb2 = 0;
  const [f0, f1, f2] = f as [Float32Array, Float32Array, Float32Array];
  const [b0, b1, b2] = b as [Float32Array, Float32Array, Float32Array];
  for (let y = y0; y <= y1; y++) {
    let ra = 0;
    let rf0 = 0;
    let rf1 = 0;
    let rf2 = 0;
    let rb0 = 0;
    let rb1 = 0;
    let rb2 = 0;
    for (let q = y * w + x0, end = y * w + x1; q <= end; q++) {
      const aq = a[q]!;
      const oq = 1 - aq;
      ra += aq;
      // blurFusion's weighted planes hold floats: each product is rounded as it is stored.
      rf0 += Math.fround(f0[q]! * aq);
      rf1 += Math.fround(f1[q]! * aq);
      rf2 += Math.fround(f2[q]! * aq);
      rb0 += Math.fround(b0[q]! * oq);
      rb1 += Math.fround(b1[q]! * oq);
      rb2 += Math.fround(b2[q]! * oq);
    }
    if (full) {
      sa += Math.fround(ra * inv);
      sf0 += Math.fround(rf0 * inv);
      sf1 += Math.fround(rf1 * inv);
      sf2 += Math.fround(rf2 * inv);
      sb0 += Math.fround(rb0 * inv);
      sb1 += Math.fround(rb1 * inv);
      sb2 += Math.fround(rb2 * inv);
    } else {
      sa += Math.fround(ra / count);
      sf0 += Math.fround(rf0 / count);
      sf1 += Math.fround(rf1 / count);
      sf2 += Math.fround(rf2 / count);
      sb0 += Math.fround(rb0 / count);
      sb1 += Math.fround(rb1 / count);
      sb2 += Math.fround(rb2 / count);
    }
  }
  const rowsInv = 1 / (y1 - y0 + 1);
  const blurredA = Math.fround(sa * rowsInv);
  const invA = Math.fround(1 / (blurredA + 1e-5));
  const invB = Math.fround(1 / (1 - blurredA + 1e-5));
  const [F0, F1, F2] = s.blurredForeground as [Float32Array, Float32Array, Float32Array];
  const [B0, B1, B2] = s.blurredBackground as [Float32Array, Float32Array, Float32Array];
  F0[p] = Math.fround(sf0 * rowsInv) * invA;
  F1[p] = Math.fround(sf1 * rowsInv) * invA;
  F2[p] = Math.fround(sf2 * rowsInv) * invA;
  B0[p] = Math.fround(sb0 * rowsInv) * invB;
  B1[p] = Math.fround(sb1 * rowsInv) * invB;
  B2[p] = Math.fround(sb2 * rowsInv) * invB;
  s.done[p] = 1;
}

/**
 * One blur-fusion pass (equation 7 of the paper) on planar RGB in 0..1. The first pass's
 * blurred foreground and the second pass's foreground are never read, so they are not kept
 * (`keep`); every value that is kept is computed exactly as before.
 */
function blurFusion(
  image: Float32Array[],
  f: Float32Array[],
  b: Float32Array[],
  a: Float32Array,
  w: number,
  h: number,
  size: number,
  keep: 'foreground' | 'blurred',
  arena: PlaneArena,
) {
  const n = w * h;
  const blurredA = boxBlur(a, w, h, size, arena);
  // 1 / blurred alpha and 1 / (1 - blurred alpha), shared by the three channels.
  const invA = arena.plane();
  const invB = arena.plane();
  const simd = arena.kernels;
  if (simd) simd.inverses(blurredA.byteOffset, invA.byteOffset, invB.byteOffset, n);
  else {
    for (let i = 0; i < n; i++) {
      invA[i] = 1 / (blurredA[i]! + 1e-5);
      invB[i] = 1 / (1 - blurredA[i]! + 1e-5);
    }
  }
  const blurredForeground: Float32Array[] = [];
  const blurredBackground: Float32Array[] = [];
  const foreground: Float32Array[] = [];
  const weighted = arena.plane();
  for (let c = 0; c < 3; c++) {
    const fc = f[c]!;
    const bc = b[c]!;
    const ic = image[c]!;
    if (simd) simd.weightByAlpha(fc.byteOffset, a.byteOffset, weighted.byteOffset, n);
    else for (let i = 0; i < n; i++) weighted[i] = fc[i]! * a[i]!;
    const bf = boxBlur(weighted, w, h, size, arena);
    if (simd) simd.weightByRest(bc.byteOffset, a.byteOffset, weighted.byteOffset, n);
    else for (let i = 0; i < n; i++) weighted[i] = bc[i]! * (1 - a[i]!);
    const bb = boxBlur(weighted, w, h, size, arena);
    if (keep === 'blurred' && simd) {
      simd.divideOut(bf.byteOffset, bb.byteOffset, invA.byteOffset, invB.byteOffset, n);
      blurredForeground.push(bf);
      blurredBackground.push(bb);
      continue;
    }
    if (keep === 'blurred') {
      for (let i = 0; i < n; i++) {
        bf[i] = bf[i]! * invA[i]!;
        bb[i] = bb[i]! * invB[i]!;
      }
      blurredForeground.push(bf);
      blurredBackground.push(bb);
      continue;
    }
    // The foreground, from the unrounded blurred estimates; the blurred background is kept.
    const fg = bf;
    if (simd) {
      simd.foreground(bf.byteOffset, bb.byteOffset, invA.byteOffset, invB.byteOffset, a.byteOffset, ic.byteOffset, n);
      blurredBackground.push(bb);
      foreground.push(fg);
      continue;
    }
    for (let i = 0; i < n; i++) {
      const fi = bf[i]! * invA[i]!;
      const bi = bb[i]! * invB[i]!;
      bb[i] = bi;
      const ai = a[i]!;
      const value = fi + ai * (ic[i]! - ai * fi - (1 - ai) * bi);
      fg[i] = value < 0 ? 0 : value > 1 ? 1 : value;
    }
    blurredBackground.push(bb);
    foreground.push(fg);
  }
  return { foreground, blurredForeground, blurredBackground, done: undefined };
}

/**
 * One blur-fusion pass over copies of the given planes (w x h each; for `foreground`, f and b are
 * the image, as in the first pass), in WebAssembly SIMD or in JavaScript, and copies of what it
 * keeps. Exported for the tests, which compare the two bit for bit.
 */
export function blurFusionPlanes(
  planes: { image: Float32Array[]; f: Float32Array[]; b: Float32Array[]; a: Float32Array },
  w: number,
  h: number,
  size: number,
  keep: 'foreground' | 'blurred',
  simd: boolean,
): { foreground: Float32Array[]; blurredForeground: Float32Array[]; blurredBackground: Float32Array[] } {
  const n = w * h;
  const arena = simd ? simdPlanes(n, w, MAX_PLANES) : planeArena(n, w);
  if (!arena) throw new Error('WebAssembly SIMD is missing');
  const copy = (from: Float32Array) => {
    const plane = arena.plane();
    plane.set(from.subarray(0, n));
    return plane;
  };
  const image = planes.image.map(copy);
  const a = copy(planes.a);
  const f = keep === 'foreground' ? image : planes.f.map(copy);
  const b = keep === 'foreground' ? image : planes.b.map(copy);
  const out = blurFusion(image, f, b, a, w, h, size, keep, arena);
  const keepCopies = (list: Float32Array[]) => list.map((p) => p.slice());
  return { foreground: keepCopies(out.foreground), blurredForeground: keepCopies(out.blurredForeground), blurredBackground: keepCopies(out.blurredBackground) };
}

/**
 * The float planes of one estimate, handed out in order from planes kept between estimates:
 * an estimate takes about 25 planes of the working size (6 MB at most), and allocating them
 * anew for every request makes garbage-collector work out of nothing. The planes are used
 * only by the synchronous part of one estimate, so estimates never share one.
 */
interface PlaneArena {
  /** A plane of the estimate's size, contents undefined (every user writes it first). */
  plane(): Float32Array;
  /** The SIMD loops, when the planes are in their memory (foreground-blur.ts). */
  kernels?: BlurKernels;
  /** Memory of the module's past the planes, for the SIMD correction (correctInBands). */
  extra?: { at: number; bytes: Uint8Array };
  /** The box blur's intermediate plane. */
  tmp: Float32Array;
  /** The box blur's column sums, one per column. */
  columns: Float64Array;
}

/**
 * The most planes one estimate takes: 4 for the image and alpha, 10 per whole-plane blur-fusion
 * pass (blurred alpha, two inverses, the weighted plane, six blurred estimates), 6 for the sparse
 * second pass.
 */
const MAX_PLANES = 24;

const kept: { planes: Float32Array[]; tmp: Float32Array; columns: Float64Array; done: Uint8Array } = {
  planes: [],
  done: new Uint8Array(0),
  tmp: new Float32Array(0),
  columns: new Float64Array(0),
};

/** Planes of n values and column sums of width w, from the kept ones (grown when too small). */
function planeArena(n: number, w: number): PlaneArena {
  const view = <T extends Float32Array | Float64Array>(array: T, length: number): T => (array.length === length ? array : (array.subarray(0, length) as T));
  if (kept.tmp.length < n) kept.tmp = new Float32Array(n);
  if (kept.columns.length < w) kept.columns = new Float64Array(w);
  let next = 0;
  return {
    plane: () => {
      let plane = kept.planes[next];
      if (!plane || plane.length < n) kept.planes[next] = plane = new Float32Array(n);
      next++;
      return view(plane, n);
    },
    tmp: view(kept.tmp, n),
    columns: view(kept.columns, w),
  };
}

/**
 * Mean over a size x size box (clipped at the borders) of one plane: separable running sums,
 * O(pixels) whatever the size, walking memory in order (rows, then whole rows at a time). The
 * column pass adds the entering row, takes out the leaving one and writes the mean in one walk.
 */
function boxBlur(src: Float32Array, w: number, h: number, size: number, arena: PlaneArena): Float32Array {
  const radius = size >> 1;
  const tmp = arena.tmp;
  if (arena.kernels) {
    const out = arena.plane();
    arena.kernels.blurRows(src.byteOffset, tmp.byteOffset, w, h, radius);
    arena.kernels.blurColumns(tmp.byteOffset, out.byteOffset, arena.columns.byteOffset, w, h, radius);
    return out;
  }
  for (let y = 0; y < h; y++) blurRow(src, tmp, y * w, w, radius);
  const out = arena.plane();
  const columns = arena.columns;
  columns.fill(0);
  let count = 0;
  for (let y = 0; y < Math.min(radius, h); y++, count++) {
    const base = y * w;
    for (let x = 0; x < w; x++) columns[x]! += tmp[base + x]!;
  }
  for (let y = 0; y < h; y++) {
    const entering = y + radius < h ? (y + radius) * w : -1;
    const leaving = y - radius - 1 >= 0 ? (y - radius - 1) * w : -1;
    if (entering >= 0) count++;
    if (leaving >= 0) count--;
    const row = y * w;
    const inv = 1 / count;
    if (entering >= 0 && leaving >= 0) {
      for (let x = 0; x < w; x++) {
        const sum = columns[x]! + tmp[entering + x]! - tmp[leaving + x]!;
        columns[x] = sum;
        out[row + x] = sum * inv;
      }
    } else if (entering >= 0) {
      for (let x = 0; x < w; x++) {
        const sum = columns[x]! + tmp[entering + x]!;
        columns[x] = sum;
        out[row + x] = sum * inv;
      }
    } else if (leaving >= 0) {
      for (let x = 0; x < w; x++) {
        const sum = columns[x]! - tmp[leaving + x]!;
        columns[x] = sum;
        out[row + x] = sum * inv;
      }
    } else {
      for (let x = 0; x < w; x++) out[row + x] = columns[x]! * inv;
    }
  }
  return out;
}

/**
 * Box mean along one row of `length` values from `start`: the box's ends, where fewer values
 * are in it, divide by their count; the middle, where all `2 * radius + 1` are, multiplies by
 * its inverse (the same value to within a float's last bit).
 */
function blurRow(src: Float32Array, dst: Float32Array, start: number, length: number, radius: number): void {
  let sum = 0;
  let count = 0;
  for (let x = 0; x < Math.min(radius, length); x++, count++) sum += src[start + x]!;
  // x in [0, head): the box grows; [head, tail): full; [tail, length): it shrinks.
  const head = Math.min(length, radius + 1);
  const tail = Math.max(head, length - radius);
  for (let x = 0; x < head; x++) {
    if (x + radius < length) {
      sum += src[start + x + radius]!;
      count++;
    }
    dst[start + x] = sum / count;
  }
  const inv = 1 / (2 * radius + 1);
  for (let x = head; x < tail; x++) {
    sum += src[start + x + radius]! - src[start + x - radius - 1]!;
    dst[start + x] = sum * inv;
  }
  for (let x = tail; x < length; x++) {
    if (x + radius < length) {
      sum += src[start + x + radius]!;
      count++;
    }
    if (x > radius) {
      sum -= src[start + x - radius - 1]!;
      count--;
    }
    dst[start + x] = sum / count;
  }
}

/**
 * The smallest box holding every soft pixel (alpha strictly between 0 and 255), inclusive, or
 * null when there is none. Each row is read from the left up to its first soft pixel and from
 * the right down to its last, four opaque or transparent pixels at a time where aligned.
 */
export function softBounds(alpha: Buffer, width: number, height: number, rows?: RowRange, options: { simd?: boolean } = {}): { left: number; top: number; right: number; bottom: number } | null {
  // The same box in WebAssembly SIMD (render-compose.ts); `simd: false` keeps to the JavaScript
  // below (the reference).
  if (options.simd !== false) {
    const box = alphaBoxSimd(alpha, width, rows ?? { top: 0, bottom: height }, 1, 254);
    if (box !== undefined) {
      countKernel('softBounds.simd');
      return box && { left: box.left, top: box.top, right: box.right, bottom: box.bottom };
    }
  }
  const words = alpha.byteOffset % 4 === 0 ? new Uint32Array(alpha.buffer, alpha.byteOffset, alpha.length >> 2) : undefined;
  const isSoft = (i: number) => alpha[i] !== 0 && alpha[i] !== 255;
  let left = width;
  let right = -1;
  let top = -1;
  let bottom = -1;
  for (let y = rows?.top ?? 0, last = rows?.bottom ?? height; y < last; y++) {
    const row = y * width;
    const end = row + width;
    let i = row;
    while (i < end) {
      if (words && (i & 3) === 0 && i + 4 <= end) {
        const word = words[i >> 2]!;
        if (word === 0 || word === 0xffffffff) {
          i += 4;
          continue;
        }
      }
      if (isSoft(i)) break;
      i++;
    }
    if (i === end) continue;
    let j = end - 1;
    while (!isSoft(j)) j--;
    if (top < 0) top = y;
    bottom = y;
    if (i - row < left) left = i - row;
    if (j - row > right) right = j - row;
  }
  return top < 0 ? null : { left, top, right, bottom };
}
