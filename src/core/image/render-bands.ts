/**
 * One render split across idle pixel workers, in row bands.
 *
 * On a host whose model runs on a GPU, a lone request's latency is mostly the API's own serial
 * work, and most of that is the render's full-size loops: the mask's upscale, the foreground
 * colour at soft edges and the RGBA composition, one worker after the other while the pool's
 * other workers sit idle. Each of those loops makes a row from that row alone (the upscale from
 * two model-size rows, the colour from the model-size view's blurred estimates, the composition
 * from the row's colour and mask), so rows [top, bottom) of the whole image's result can be made
 * by one worker and the next band by another at the same time, into shared memory, and the
 * result is the same bytes (test/render-bands.test.ts). One worker then encodes the RGBA.
 *
 * Only while workers and cores are idle: the pool splits across the workers with no task
 * running or queued (PixelPool.idleWorkers), at most one per idle core of the host past the
 * render's own (idle-cores.ts) and at most `renderBands`. Under load a render stays one task as
 * before and the CPU per image does not grow; a split render costs more CPU (10-15 ms per 1 MP
 * image measured, mostly V8's background threads working for one more isolate; ~3 ms in the
 * bands themselves: each computes the blurred estimates of its own part of the soft edge, and
 * one more hand-off) for a shorter wall time where cores are free (docs/benchmarks-history.md, "Eighth
 * round").
 *
 * Which renders split: the default cutout, an RGBA PNG of the whole image at full size by the
 * fast encoder (composesStraightToEncoder in output.ts), with the full-size decode made already
 * (segment()'s decode-once or its decode beside the model call: images under twice the model's
 * size), one mask (no `best` region passes), no roi, hints or alpha of the input's own, and the
 * model-size view for the colour estimate. Everything else renders as one task.
 */
import { estimateForeground, type ImageView } from './foreground.js';
import { composeRgba, composesStraightToEncoder, foregroundBox, type Box, type RenderJob, type RenderResult } from './output.js';
import type { PixelPool } from './pixel-pool.js';
import { isShared } from './shared-bytes.js';
import { upscaleMask, type RowRange } from './tensor.js';
import { traceStep } from '../../tracing/otel.js';

/**
 * A band is at least this many full-size pixels (384 Ki: a 1 MP image splits in two at most, a
 * 0.67 MP one not at all). A split costs about 10-15 ms of CPU whatever the size (the second
 * worker's hand-offs and V8's helper threads for its heap), which the WebAssembly kernels' few ms
 * on a smaller band do not pay back (docs/benchmarks-history.md, "Eighth round").
 */
export const MIN_BAND_PIXELS = 384 * 1024;

/** What one band's worker is given: every buffer is shared memory, the same for all bands. */
export interface BandJob {
  rows: RowRange;
  width: number;
  height: number;
  /** The model's mask (model-size grid) and its size. */
  grey: Buffer;
  gridWidth: number;
  gridHeight: number;
  /** The full-size decode (RGB), whose band rows' soft pixels are recoloured in place. */
  decoded: Buffer;
  /** The model-size view the colour estimate samples; absent when the render makes no estimate. */
  view?: ImageView | undefined;
  /** The full-size mask, whose band rows this band writes. */
  alpha: Buffer;
  /** The full-size RGBA, whose band rows this band writes. */
  rgba: Buffer;
}

/** A band's answer: its foreground box, in the whole image's coordinates. */
export interface BandResult {
  box: Box | null;
  ms: number;
}

/** The pixels the bands made, handed to the encoding task (RenderJob's `made`). */
export interface MadePixels {
  alpha: Buffer;
  rgba: Buffer;
  box: Box | null;
  /** Milliseconds of the bands' wall time (the render's `postprocess`). */
  postprocessMs: number;
}

/**
 * The row bands to render `job` in, or null to render it as one task: `idle` workers free now,
 * at most `most`, and bands of at least MIN_BAND_PIXELS. Band edges fall on rows that are
 * multiples of 4, so each band's mask starts on a 4-byte boundary when the width is even and the
 * kernels take their four-pixels-at-a-time paths as on the whole image.
 */
export function planBands(job: RenderJob, idle: number, most: number): RowRange[] | null {
  const { width, height } = job.probe;
  const n = Math.min(idle, most, Math.floor((width * height) / MIN_BAND_PIXELS), height >> 2);
  if (n < 2 || !splittable(job)) return null;
  const bands: RowRange[] = [];
  for (let k = 0, top = 0; k < n; k++) {
    const bottom = k === n - 1 ? height : Math.round((height * (k + 1)) / n / 4) * 4;
    bands.push({ top, bottom });
    top = bottom;
  }
  return bands;
}

/** Whether the render is the shape bands make (the module's comment lists it). */
function splittable(job: RenderJob): boolean {
  const view = job.view;
  return (
    job.decoded !== undefined &&
    isShared(job.decoded) &&
    isShared(job.mask.grey) &&
    job.decoded.length === job.probe.width * job.probe.height * 3 &&
    !job.probe.hasAlpha &&
    job.mask.parts.length === 0 &&
    !job.options.roi &&
    !job.hints &&
    (!job.render.foregroundEstimation || (view !== undefined && view.width > 0 && isShared(view.rgb) && isShared(view.alpha))) &&
    composesStraightToEncoder(job)
  );
}

/**
 * One band, in a pixel worker: the mask's rows upscaled, the band's foreground box, its soft
 * pixels recoloured (foreground.ts, from the model-size view: no rows of other bands are read),
 * and its RGBA composed: the same calls the whole render makes, on the band's rows.
 */
export async function renderBand(job: BandJob): Promise<BandResult> {
  const started = performance.now();
  const { width, height, rows } = job;
  const { top, bottom } = rows;
  upscaleMask(job.grey, job.gridWidth, job.gridHeight, width, height, job.alpha, { rows });
  const alpha = job.alpha.subarray(top * width, bottom * width);
  const box = foregroundBox(alpha, width, bottom - top);
  if (job.view) await estimateForeground(job.decoded, job.alpha, width, height, job.view, 'band', { rows });
  composeRgba(job.decoded.subarray(top * width * 3, bottom * width * 3), alpha, null, job.rgba.subarray(top * width * 4, bottom * width * 4));
  return { box: box && { ...box, top: box.top + top }, ms: performance.now() - started };
}

/** The bands' boxes as one: the smallest box holding them all, or null when none has one. */
export function mergeBoxes(boxes: (Box | null)[]): Box | null {
  let top = Infinity;
  let left = Infinity;
  let bottom = -Infinity;
  let right = -Infinity;
  for (const box of boxes) {
    if (!box) continue;
    top = Math.min(top, box.top);
    left = Math.min(left, box.left);
    bottom = Math.max(bottom, box.top + box.height);
    right = Math.max(right, box.left + box.width);
  }
  return top === Infinity ? null : { top, left, width: right - left, height: bottom - top };
}

/**
 * `job` rendered in `bands`: one renderBand task per band at once, then one render task that
 * encodes what they made (renderFullSize with `made`). The shared buffers come from the pool's
 * band memory and go back to it once every task that writes or reads them has settled.
 */
export async function renderInBands(pool: PixelPool, job: RenderJob, bands: RowRange[], renderWhole: (job: RenderJob) => Promise<RenderResult>): Promise<RenderResult> {
  const { width, height } = job.probe;
  const memory = pool.bandMemory;
  const alpha = memory.take(width * height);
  const rgba = memory.take(width * height * 4);
  // Every band reads the model-size view: planBands takes only one in shared memory (segment()
  // asks for that while workers are idle: PixelPool.splitsRenders).
  const view = job.render.foregroundEstimation ? job.view : undefined;
  const started = performance.now();
  try {
    // A span of its own (the request's timeline: bench/request-timeline.ts), ending as the last band does.
    const settled = await traceStep(
      'bgcut.render.bands',
      () =>
        Promise.allSettled(
          bands.map((rows) =>
            pool.renderBand({ rows, width, height, grey: job.mask.grey, gridWidth: job.mask.width, gridHeight: job.mask.height, decoded: job.decoded!, view, alpha, rgba }),
          ),
        ),
      { attributes: { 'bgcut.render.bands': bands.length } },
    );
    // Every band has settled before anything is thrown: none still writes the shared buffers.
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed) throw failed.reason;
    const box = mergeBoxes(settled.map((s) => (s as PromiseFulfilledResult<BandResult>).value.box));
    const made: MadePixels = { alpha, rgba, box, postprocessMs: performance.now() - started };
    return await renderWhole({ ...job, view: undefined, made });
  } finally {
    memory.giveBack(alpha);
    memory.giveBack(rgba);
  }
}
