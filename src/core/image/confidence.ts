/**
 * How sure the model was of a cutout, 0..1 (1 = sure), from the mask at the model's size and,
 * when several passes looked at the image (`best`), from where they disagree.
 *
 * A pixel is *unsure* when the final mask holds a probability between 0.1 and 0.9, or when two
 * looks at it fall on different sides of 0.5. The object is every pixel at or above 0.5 plus every
 * unsure pixel. confidence = 1 - unsure / object: the share of the object the model (and its
 * passes) agreed on. Nothing found at all is confidence 0 (an empty cutout of a photo is more
 * often a miss than an answer).
 *
 * The thresholds are the obvious ones (a tenth from either end, and the 0.5 the cutout itself
 * uses), not fitted to any data set.
 */

/** 8-bit mask values strictly between these are unsure (probability 0.1 .. 0.9). */
const UNSURE_LOW = 26;
const UNSURE_HIGH = 229;
/** The cutout's own foreground threshold (probability 0.5). */
const HALF = 128;

/** A second look at part of the image: its mask, and the box of the model grid it covers. */
export interface Look {
  mask: Buffer;
  width: number;
  height: number;
  /** Where it lies on the final mask's grid (the whole grid for a whole-image pass). */
  box: { left: number; top: number; width: number; height: number };
}

/** The confidence of `mask` (w x h, 8-bit), with `looks` (the passes merged into it) compared where they overlap. */
export function cutoutConfidence(mask: Buffer, w: number, h: number, looks: Look[] = []): number {
  // Where the looks disagree, marked on the final grid (nearest sample of each look).
  let disagree: Uint8Array | undefined;
  if (looks.length > 1) {
    disagree = new Uint8Array(w * h);
    const side = new Int8Array(w * h).fill(-1);
    for (const look of looks) {
      const { left, top, width: bw, height: bh } = look.box;
      const x0 = Math.max(0, Math.floor(left));
      const y0 = Math.max(0, Math.floor(top));
      const x1 = Math.min(w, Math.ceil(left + bw));
      const y1 = Math.min(h, Math.ceil(top + bh));
      const sx = look.width / bw;
      const sy = look.height / bh;
      for (let y = y0; y < y1; y++) {
        const ly = Math.min(look.height - 1, Math.max(0, Math.floor((y + 0.5 - top) * sy)));
        for (let x = x0; x < x1; x++) {
          const lx = Math.min(look.width - 1, Math.max(0, Math.floor((x + 0.5 - left) * sx)));
          const s = look.mask[ly * look.width + lx]! >= HALF ? 1 : 0;
          const i = y * w + x;
          if (side[i] === -1) side[i] = s;
          else if (side[i] !== s) disagree[i] = 1;
        }
      }
    }
  }
  let unsure = 0;
  let object = 0;
  // A model's mask is mostly 0 and 255: four such pixels are counted at a time where aligned
  // (none unsure; 255s are object), the rest one by one.
  const words = mask.byteOffset % 4 === 0 ? new Uint32Array(mask.buffer, mask.byteOffset, (w * h) >> 2) : undefined;
  for (let i = 0; i < w * h; i++) {
    if (words && (i & 3) === 0 && i + 4 <= w * h && (disagree === undefined || (disagree[i]! | disagree[i + 1]! | disagree[i + 2]! | disagree[i + 3]!) === 0)) {
      const word = words[i >> 2]!;
      if (word === 0) {
        i += 3;
        continue;
      }
      if (word === 0xffffffff) {
        object += 4;
        i += 3;
        continue;
      }
    }
    const v = mask[i]!;
    const isUnsure = (v > UNSURE_LOW && v < UNSURE_HIGH) || (disagree !== undefined && disagree[i] === 1);
    if (isUnsure) unsure++;
    if (isUnsure || v >= HALF) object++;
  }
  if (object === 0) return 0;
  return 1 - unsure / object;
}
