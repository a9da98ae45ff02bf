/** Cutout quality metrics against a ground-truth matte, as `npm run eval` reports them. */

export interface Scores {
  iou: number;
  mae: number;
  boundaryF: number;
}

/** Pixels of a binary mask that touch a pixel of the other value (4-neighbourhood). */
function boundary(mask: Uint8Array, w: number, h: number): Uint8Array {
  const out = new Uint8Array(w * h);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const i = y * w + x;
      const v = mask[i];
      if ((x > 0 && mask[i - 1] !== v) || (x < w - 1 && mask[i + 1] !== v) || (y > 0 && mask[i - w] !== v) || (y < h - 1 && mask[i + w] !== v)) {
        out[i] = 1;
      }
    }
  }
  return out;
}

/** Square dilation by `r`: a pixel is set when a set pixel lies within r along rows, then columns. */
function dilate(mask: Uint8Array, w: number, h: number, r: number): Uint8Array {
  const along = (src: Uint8Array, count: number, length: number, at: (line: number, i: number) => number) => {
    const out = new Uint8Array(w * h);
    for (let line = 0; line < count; line++) {
      let last = -Infinity;
      for (let i = 0; i < length; i++) {
        if (src[at(line, i)]) last = i;
        if (i - last <= r) out[at(line, i)] = 1;
      }
      let next = Infinity;
      for (let i = length - 1; i >= 0; i--) {
        if (src[at(line, i)]) next = i;
        if (next - i <= r) out[at(line, i)] = 1;
      }
    }
    return out;
  };
  const rows = along(mask, h, w, (y, x) => y * w + x);
  return along(rows, w, h, (x, y) => y * w + x);
}

/**
 * IoU and MAE of the alpha against the ground truth, and the boundary F-measure: precision and
 * recall of the binarised boundaries within a tolerance of 0.75 % of the image diagonal (as in
 * the DAVIS benchmark).
 */
export function score(alpha: Uint8Array, truth: Uint8Array, w: number, h: number): Scores {
  let inter = 0;
  let union = 0;
  let absError = 0;
  const a = new Uint8Array(w * h);
  const t = new Uint8Array(w * h);
  for (let i = 0; i < w * h; i++) {
    a[i] = alpha[i]! >= 128 ? 1 : 0;
    t[i] = truth[i]! >= 128 ? 1 : 0;
    if (a[i] && t[i]) inter++;
    if (a[i] || t[i]) union++;
    absError += Math.abs(alpha[i]! - truth[i]!);
  }
  const tolerance = Math.max(1, Math.round(0.0075 * Math.hypot(w, h)));
  const ba = boundary(a, w, h);
  const bt = boundary(t, w, h);
  const da = dilate(ba, w, h, tolerance);
  const dt = dilate(bt, w, h, tolerance);
  let baCount = 0;
  let btCount = 0;
  let precisionHits = 0;
  let recallHits = 0;
  for (let i = 0; i < w * h; i++) {
    if (ba[i]) {
      baCount++;
      if (dt[i]) precisionHits++;
    }
    if (bt[i]) {
      btCount++;
      if (da[i]) recallHits++;
    }
  }
  const precision = baCount ? precisionHits / baCount : btCount ? 0 : 1;
  const recall = btCount ? recallHits / btCount : baCount ? 0 : 1;
  const boundaryF = precision + recall > 0 ? (2 * precision * recall) / (precision + recall) : 0;
  return { iou: union ? inter / union : 1, mae: absError / (255 * w * h), boundaryF };
}

/** Ranks, ties sharing their mean rank. */
function ranks(xs: number[]): number[] {
  const order = xs.map((x, i) => [x, i] as const).sort((a, b) => a[0] - b[0]);
  const out = new Array<number>(xs.length);
  for (let i = 0; i < order.length; ) {
    let j = i;
    while (j + 1 < order.length && order[j + 1]![0] === order[i]![0]) j++;
    for (let k = i; k <= j; k++) out[order[k]![1]] = (i + j) / 2;
    i = j + 1;
  }
  return out;
}

/** Spearman's rank correlation: Pearson's on the ranks (ties get their mean rank). */
export function spearman(a: number[], b: number[]): number {
  if (a.length < 3) return NaN;
  const ra = ranks(a);
  const rb = ranks(b);
  const ma = ra.reduce((x, y) => x + y, 0) / ra.length;
  const mb = rb.reduce((x, y) => x + y, 0) / rb.length;
  let num = 0;
  let da = 0;
  let db = 0;
  for (let i = 0; i < ra.length; i++) {
    num += (ra[i]! - ma) * (rb[i]! - mb);
    da += (ra[i]! - ma) ** 2;
    db += (rb[i]! - mb) ** 2;
  }
  return da === 0 || db === 0 ? NaN : num / Math.sqrt(da * db);
}
