import { countKernel } from './kernel-calls.js';

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
  const scale = Math.min(1, Math.sqrt(WORKING_PIXELS / (from.width * from.height)));
  // Working size: the image's aspect, even when the source itself is stretched (model input).
  const w = Math.max(1, Math.round(scale === 1 ? from.width : Math.sqrt(WORKING_PIXELS * (width / height))));
  const h = Math.max(1, Math.round(scale === 1 ? from.height : Math.sqrt(WORKING_PIXELS * (height / width))));
  if (w === from.width && h === from.height) return from;
  return { rgb: sampleView(from.rgb, from.width, from.height, 3, w, h), alpha: sampleView(from.alpha, from.width, from.height, 1, w, h), width: w, height: h };
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
 */
export async function estimateForeground(
  rgb: Buffer,
  alpha: Buffer,
  width: number,
  height: number,
  source?: ImageView,
  region: 'band' | 'whole' = 'band',
): Promise<Buffer> {
  countKernel('estimateForeground');
  // Only soft pixels change: a hard mask (or an empty one) needs no estimate at all.
  const soft = softBounds(alpha, width, height);
  if (!soft) return rgb;
  const view = await workingView(source ?? { rgb, alpha, width, height }, width, height);
  const { width: w, height: h } = view;

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
  const arena = planeArena(n, cw);

  // Planar floats in 0..1: one plane per channel keeps every blur loop a straight walk.
  const image = [arena.plane(), arena.plane(), arena.plane()];
  const a = arena.plane();
  const smallRgb = view.rgb;
  const smallAlpha = view.alpha;
  for (let y = 0; y < ch; y++) {
    const from = (box.top + y) * w + box.left;
    const to = y * cw;
    for (let x = 0; x < cw; x++) {
      const s = from + x;
      image[0]![to + x] = smallRgb[s * 3]! / 255;
      image[1]![to + x] = smallRgb[s * 3 + 1]! / 255;
      image[2]![to + x] = smallRgb[s * 3 + 2]! / 255;
      a[to + x] = smallAlpha[s]! / 255;
    }
  }

  const first = blurFusion(image, image, image, a, cw, ch, firstSize, 'foreground', arena);
  const second = blurFusion(image, first.foreground, first.blurredBackground, a, cw, ch, secondSize, 'blurred', arena);

  // The final per-pixel correction, at full size and only where alpha is soft, samples the
  // smooth blurred estimates bilinearly from the working size (in the box's coordinates).
  const bf = second.blurredForeground;
  const bb = second.blurredBackground;
  const out = rgb;
  // Opaque and transparent pixels keep their colour: four of them are skipped at a time.
  const words = alpha.byteOffset % 4 === 0 ? new Uint32Array(alpha.buffer, alpha.byteOffset, alpha.length >> 2) : undefined;
  for (let y = soft.top; y <= soft.bottom; y++) {
    const fy = y * sy;
    const y0 = Math.floor(fy);
    const y1 = Math.min(h - 1, y0 + 1);
    const ty = fy - y0;
    const r0 = (y0 - box.top) * cw - box.left;
    const r1 = (y1 - box.top) * cw - box.left;
    const end = y * width + soft.right + 1;
    for (let i = y * width + soft.left; i < end; i++) {
      if (words && (i & 3) === 0 && i + 4 <= end) {
        const word = words[i >> 2]!;
        if (word === 0 || word === 0xffffffff) {
          i += 3;
          continue;
        }
      }
      const ai = alpha[i]!;
      if (ai === 0 || ai === 255) continue;
      const x = i - y * width;
      const fx = x * sx;
      const x0 = Math.floor(fx);
      const x1 = Math.min(w - 1, x0 + 1);
      const tx = fx - x0;
      const p00 = r0 + x0;
      const p01 = r0 + x1;
      const p10 = r1 + x0;
      const p11 = r1 + x1;
      const w00 = (1 - tx) * (1 - ty);
      const w01 = tx * (1 - ty);
      const w10 = (1 - tx) * ty;
      const w11 = tx * ty;
      const al = ai / 255;
      for (let c = 0; c < 3; c++) {
        const F = bf[c]!;
        const B = bb[c]!;
        const fb = 255 * (F[p00]! * w00 + F[p01]! * w01 + F[p10]! * w10 + F[p11]! * w11);
        const bg = 255 * (B[p00]! * w00 + B[p01]! * w01 + B[p10]! * w10 + B[p11]! * w11);
        const f = fb + al * (out[i * 3 + c]! - al * fb - (1 - al) * bg);
        out[i * 3 + c] = f <= 0 ? 0 : f >= 255 ? 255 : Math.round(f);
      }
    }
  }
  return out;
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
  for (let i = 0; i < n; i++) {
    invA[i] = 1 / (blurredA[i]! + 1e-5);
    invB[i] = 1 / (1 - blurredA[i]! + 1e-5);
  }
  const blurredForeground: Float32Array[] = [];
  const blurredBackground: Float32Array[] = [];
  const foreground: Float32Array[] = [];
  const weighted = arena.plane();
  for (let c = 0; c < 3; c++) {
    const fc = f[c]!;
    const bc = b[c]!;
    const ic = image[c]!;
    for (let i = 0; i < n; i++) weighted[i] = fc[i]! * a[i]!;
    const bf = boxBlur(weighted, w, h, size, arena);
    for (let i = 0; i < n; i++) weighted[i] = bc[i]! * (1 - a[i]!);
    const bb = boxBlur(weighted, w, h, size, arena);
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
  return { foreground, blurredForeground, blurredBackground };
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
  /** The box blur's intermediate plane. */
  tmp: Float32Array;
  /** The box blur's column sums, one per column. */
  columns: Float64Array;
}

const kept: { planes: Float32Array[]; tmp: Float32Array; columns: Float64Array } = {
  planes: [],
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
export function softBounds(alpha: Buffer, width: number, height: number): { left: number; top: number; right: number; bottom: number } | null {
  const words = alpha.byteOffset % 4 === 0 ? new Uint32Array(alpha.buffer, alpha.byteOffset, alpha.length >> 2) : undefined;
  const isSoft = (i: number) => alpha[i] !== 0 && alpha[i] !== 255;
  let left = width;
  let right = -1;
  let top = -1;
  let bottom = -1;
  for (let y = 0; y < height; y++) {
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
