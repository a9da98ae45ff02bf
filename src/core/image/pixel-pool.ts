import os from 'node:os';
import { Piscina } from 'piscina';
import { ApiError } from '../errors.js';
import type { Look } from './confidence.js';
import type { ImageView } from './foreground.js';
import type { MaskPlan } from './full-size-mask.js';
import { isFramed, type ModelInput, type ModelInputJob, type PreparedModelInput } from './model-input.js';
import type { PassInputJob, PassInputs } from './multi-pass.js';
import type { BestPasses, Region } from './passes.js';
import type { RemoveBgBodyResult, RenderJob, RenderResult, WorkerApiError } from './pixel-worker.js';
import type { BodyFields, BodyKind } from '../removebg/body-fields.js';
import type { UploadLimits } from '../multipart.js';
import type { ImageLimits, Probe } from './pipeline.js';
import { countKernel } from './kernel-calls.js';
import { isShared, SharedPool } from './shared-bytes.js';
import { planBands, renderInBands, type BandJob, type BandResult } from './render-bands.js';
import { gatheredAgain, isGatheredUpload } from '../upload-bytes.js';
import { MainThreadCollector } from './main-thread-garbage.js';
import { IdleCores } from './idle-cores.js';
import { MAX_PNG_BANDS } from './png-encoder.js';

/**
 * The threads that run the pixel loops written in JavaScript (full-size mask, foreground colour,
 * composition, foreground box; `best`'s mask merges), so none of them blocks the host's event
 * loop: a bounded piscina pool. Decoding, resizing, mirroring and encoding are libvips's (sharp),
 * on libuv's thread pool, already off the loop.
 *
 * Memory: a task's inputs are the upload and model-size buffers, copied once into memory of
 * their own and moved (transferred) to the worker (Parcel), and its outputs are moved back; the
 * full-size colour and mask are made, used and dropped inside the worker, so a request holds each full-size buffer once, as before. Tasks
 * wait in piscina's queue; how many requests render at once is bounded before that, by the
 * handler's pixel budget (`limits.maxPixelsInProcess`).
 */
export interface PixelPoolOptions {
  /** Worker threads; default defaultPixelThreads(). */
  threads?: number;
  /** Milliseconds an idle worker (past the first) lives. Default 30 000. */
  idleTimeoutMs?: number;
  /**
   * A full collection of this thread once this many bytes of results came back since V8's last
   * (main-thread-garbage.ts); 0 (the default): left to V8.
   */
  mainThreadGcBytes?: number;
  /** Most workers one render is split across while they are idle (render-bands.ts); 1: never split. Default: `threads`. */
  renderBands?: number;
  /**
   * Most row bands the fast encoder splits one RGBA PNG into, on libuv's threads, while cores are
   * idle (png-bands.ts; a render's own core and one per idle core); 1: never. Default 1.
   */
  pngBands?: number;
  /**
   * The host's idle cores now: a split render takes one band per idle core past its own, so
   * none on a busy host. Default: sampled from the kernel's CPU times (idle-cores.ts) when
   * renders or PNG encodes may split. Tests give a constant.
   */
  idleCores?: () => number;
}

/**
 * Worker threads by default: one fewer than the host's cores (the event loop keeps one), at most
 * four — libuv's default pool, on which sharp decodes and encodes what these threads compose, is
 * four threads, and a fifth composer would only wait for an encoder — and at least one.
 */
export function defaultPixelThreads(cores = os.availableParallelism()): number {
  return Math.max(1, Math.min(4, cores - 1));
}

// Tests run the sources through vitest, but a worker thread runs plain Node: it loads the built
// worker (`npm test` builds first). The entry is CommonJS on purpose (pixel-worker-entry.cts).
/** The file each pool thread loads (a file: URL). */
export const PIXEL_WORKER_FILE = (
  import.meta.url.endsWith('.ts') ? new URL('../../../dist/src/core/image/pixel-worker-entry.cjs', import.meta.url) : new URL('./pixel-worker-entry.cjs', import.meta.url)
).href;

export class PixelPool {
  readonly threads: number;
  private readonly piscina: Piscina;
  /** Thread ids the pool's tasks ran in (a test checks that the pixel work left the main thread). */
  readonly ranIn = new Set<number>();
  /** The last 64 tasks that came back: their name and the thread that ran each (tests check where a render ran). */
  readonly tasksRan: { name: string; threadId: number }[] = [];
  /** Tasks that came back so far: the last `tasksSettled - n` of them are tasksRan's last ones. */
  tasksSettled = 0;

  /** The tasks that came back since tasksSettled read `since` (64 at most). */
  tasksSince(since: number): { name: string; threadId: number }[] {
    const n = this.tasksSettled - since;
    return n <= 0 ? [] : this.tasksRan.slice(-Math.min(n, this.tasksRan.length));
  }
  /**
   * Bytes this thread has copied to send tasks their buffers (Parcel): what shared memory spares
   * (a test checks that a segmentation's buffers reach the render without a copy).
   */
  copiedBytes = 0;
  /** Collects the dead buffers the results leave on this thread (main-thread-garbage.ts). */
  readonly collector: MainThreadCollector;
  /** Most workers one render is split across (render-bands.ts); 1: none. */
  readonly renderBands: number;
  /** Most row bands one fast PNG encode is split into (png-bands.ts); 1: none. */
  readonly pngBands: number;
  /**
   * The shared full-size buffers row bands write (the mask and the RGBA), kept between split
   * renders: a fresh one faults in its pages as it is first written, about 0.65 ms per MB. Three
   * 1 MP sets (1 + 4 MB) at most.
   */
  readonly bandMemory = new SharedPool(16 * 1024 * 1024);
  /** Renders split in row bands (render-bands.ts), and renders made as one task: the API's `bgcut_renders_total`. */
  rendersInBands = 0;
  rendersWhole = 0;
  /** PNGs the fast encoder made in row bands (png-bands.ts) and whole: the API's `bgcut_png_encodes_total`. */
  pngsInBands = 0;
  pngsWhole = 0;
  /** The host's idle cores now (PixelPoolOptions.idleCores). */
  private readonly idleCores: () => number;
  private readonly sampler: IdleCores | undefined;
  /** Tasks given to piscina and not yet settled (running or queued): idleWorkers() is what is left. */
  private pending = 0;

  constructor(options: PixelPoolOptions = {}) {
    this.collector = new MainThreadCollector(options.mainThreadGcBytes ?? 0);
    this.threads = options.threads ?? defaultPixelThreads();
    if (!Number.isInteger(this.threads) || this.threads < 1 || this.threads > 256) throw new RangeError('pixel pool threads must be an integer in 1..256');
    // Off unless asked: on an H200 host a lone 1 MP cutout gained ~2 ms of p50 (in the runs' spread)
    // for 10-20 ms more API CPU per image (docs/inference-server.md, "Fifth run").
    this.renderBands = options.renderBands ?? 1;
    if (!Number.isInteger(this.renderBands) || this.renderBands < 1 || this.renderBands > 256) throw new RangeError('renderBands must be an integer in 1..256');
    this.pngBands = options.pngBands ?? 1;
    if (!Number.isInteger(this.pngBands) || this.pngBands < 1 || this.pngBands > MAX_PNG_BANDS) throw new RangeError(`pngBands must be an integer in 1..${MAX_PNG_BANDS}`);
    if (options.idleCores) this.idleCores = options.idleCores;
    else if ((this.renderBands > 1 && this.threads > 1) || this.pngBands > 1) {
      const sampler = new IdleCores();
      this.sampler = sampler;
      this.idleCores = () => sampler.now;
    } else this.idleCores = () => 0;
    this.piscina = new Piscina({
      filename: PIXEL_WORKER_FILE,
      minThreads: 1,
      maxThreads: this.threads,
      idleTimeout: options.idleTimeoutMs ?? 30_000,
      // Tasks await sharp inside the worker: its event loop must run between them.
      atomics: 'async',
    });
  }

  private async run<T>(name: string, task: unknown, parcel?: Parcel): Promise<T> {
    if (parcel) this.copiedBytes += parcel.copiedBytes;
    this.pending++;
    let answer: { value: T; threadId: number };
    try {
      answer = (await this.piscina.run(task, { name, transferList: parcel?.transferList })) as { value: T; threadId: number };
    } finally {
      this.pending--;
    }
    const { value, threadId } = answer;
    this.ranIn.add(threadId);
    this.tasksRan.push({ name, threadId });
    this.tasksSettled++;
    if (this.tasksRan.length > 64) this.tasksRan.shift();
    this.collector.arrivedWith(value);
    return value;
  }

  /**
   * Workers free for one more task now: the pool's threads less the tasks given and not yet
   * settled (running or waiting in the queue). What a render may split across (render-bands.ts).
   */
  idleWorkers(): number {
    return Math.max(0, this.threads - this.pending);
  }

  /**
   * Whether a render started now would be split (render-bands.ts): splitting is on and two or
   * more workers are idle. segment() then asks for the model-size image in shared memory, which
   * every band reads, rather than memory of its own moved to one worker.
   */
  splitsRenders(): boolean {
    return this.renderBands > 1 && this.workersToSplitAcross() >= 2;
  }

  /** Workers a render started now may take: the idle ones, at most one more than the host's idle cores. */
  private workersToSplitAcross(): number {
    return Math.min(this.idleWorkers(), 1 + Math.floor(this.idleCores()));
  }

  /**
   * One row band of a split render (render-bands.ts's renderBand): the buffers are shared memory,
   * written in place by the worker; what comes back is the band's foreground box.
   */
  renderBand(job: BandJob): Promise<BandResult> {
    const parcel = new Parcel();
    const view = job.view && { ...job.view, rgb: parcel.add(job.view.rgb), alpha: parcel.add(job.view.alpha) };
    return this.run<BandResult>('renderBand', { ...job, grey: parcel.add(job.grey), decoded: parcel.add(job.decoded), alpha: parcel.add(job.alpha), rgba: parcel.add(job.rgba), view }, parcel);
  }

  /** The full-size mask of a plan (buildFullSizeMask). */
  async fullSizeMask(plan: MaskPlan, width: number, height: number): Promise<Buffer> {
    const parcel = new Parcel();
    return asBuffer(await this.run<Uint8Array>('fullSizeMask', { plan: parcel.plan(plan), width, height }, parcel));
  }

  /** mergeMasks of multi-pass.ts; with `mirrorLast`, the last mask (that size) is mirrored back first, in the worker. */
  async mergeMasks(masks: Buffer[], how: BestPasses['mirrorMerge'], mirrorLast?: { width: number; height: number }): Promise<Buffer> {
    const parcel = new Parcel();
    return asBuffer(await this.run<Uint8Array>('mergeMasks', { masks: masks.map((mask) => parcel.add(mask)), how, mirrorLast }, parcel));
  }

  /** upscaleMask of tensor.ts. */
  async upscaleMask(src: Buffer, srcWidth: number, srcHeight: number, width: number, height: number): Promise<Buffer> {
    const parcel = new Parcel();
    return asBuffer(await this.run<Uint8Array>('upscaleMask', { src: parcel.add(src), srcWidth, srcHeight, width, height }, parcel));
  }

  /** looksConfidence of multi-pass.ts. */
  looksConfidence(whole: Buffer, w: number, h: number, looks: Look[], laidFrom: number): Promise<number> {
    const parcel = new Parcel();
    return this.run<number>('looksConfidence', { whole: parcel.add(whole), w, h, looks: looks.map((look) => ({ ...look, mask: parcel.add(look.mask) })), laidFrom }, parcel);
  }

  /**
   * workingView of foreground.ts. `giveUp`: the caller is done with `view` (it keeps the working
   * view instead): a model-size image in memory of its own is moved to the worker, not copied,
   * and reads as empty here afterwards.
   */
  async workingView(view: ImageView, width: number, height: number, giveUp = false): Promise<ImageView> {
    const parcel = new Parcel();
    const small = await this.run<ImageView>('workingView', { view: parcel.view(view, giveUp), width, height }, parcel);
    return { ...small, rgb: asBuffer(small.rgb), alpha: asBuffer(small.alpha) };
  }

  /** objectCrop of multi-pass.ts. */
  objectCrop(mask: Buffer, mw: number, mh: number, width: number, height: number, margin: number, maxArea: number): Promise<Region | null> {
    const parcel = new Parcel();
    return this.run<Region | null>('objectCrop', { mask: parcel.add(mask), mw, mh, width, height, margin, maxArea }, parcel);
  }

  /**
   * prepareModelInput of model-input.ts: the model-size decode and the tensor, written into the
   * model call's message when the job has its prefix. The upload goes as render()'s does (shared
   * memory as it is, else one copy moved); what comes back is moved, not copied. `lend`: the
   * caller alone holds the upload (a synchronous request's): its memory is moved to the worker
   * and back with the result (`bytes`, to use from then on; `job.bytes` reads as empty), no copy.
   */
  async modelInput(job: ModelInputJob, lend = false): Promise<PreparedModelInput & { bytes?: Buffer }> {
    const parcel = new Parcel();
    const bytes = lend ? parcel.lend(job.bytes) : parcel.add(job.bytes);
    const result = await this.run<(PreparedModelInput & { bytes?: Uint8Array }) | WorkerApiError>('modelInput', { ...job, bytes, lent: parcel.lent }, parcel);
    if ('apiError' in result) throw new ApiError(result.apiError.code, { detail: result.apiError.detail, headers: result.apiError.headers });
    // The message was made for this one call: the inference client moves it on, not copies it.
    const input = isFramed(result.input) ? { ...result.input, message: asBuffer(result.input.message), sendOnce: true } : result.input;
    return { ...result, input, rgb: asBuffer(result.rgb), decoded: result.decoded && asBuffer(result.decoded), bytes: result.bytes && parcel.lentBack(result.bytes) };
  }

  /**
   * The upright full-size decode (decodeRaw), in a worker, into shared memory that the render
   * writes in place; the upload goes as modelInput()'s does (`lend` too). segment() runs it beside the model call.
   */
  async fullDecode(bytes: Buffer, probe: Probe, limits: ImageLimits, lend = false): Promise<{ decoded: Buffer; decodeMs: number; bytes?: Buffer }> {
    const parcel = new Parcel();
    const sent = lend ? parcel.lend(bytes) : parcel.add(bytes);
    const result = await this.run<{ decoded: Uint8Array; decodeMs: number; bytes?: Uint8Array } | WorkerApiError>('fullDecode', { bytes: sent, probe, limits, lent: parcel.lent }, parcel);
    if ('apiError' in result) throw revive(result);
    return { decoded: asBuffer(result.decoded), decodeMs: result.decodeMs, bytes: result.bytes && parcel.lentBack(result.bytes) };
  }

  /**
   * preparePassInputs of multi-pass.ts: `best`'s crop, mirror and scale passes' model inputs,
   * decoded, mirrored and written into their messages in a worker; the messages are moved here.
   */
  async passInputs(job: PassInputJob): Promise<PassInputs> {
    const parcel = new Parcel();
    const source = 'rgb' in job.source ? { rgb: parcel.add(job.source.rgb) } : { ...job.source, bytes: parcel.add(job.source.bytes) };
    const result = await this.run<PassInputs | WorkerApiError>('passInputs', { ...job, source }, parcel);
    if ('apiError' in result) throw new ApiError(result.apiError.code, { detail: result.apiError.detail, headers: result.apiError.headers });
    const framed = (input: ModelInput | undefined) => (input && isFramed(input) ? { ...input, message: asBuffer(input.message), sendOnce: true } : input);
    return { rgb: EMPTY, plain: framed(result.plain), mirrored: framed(result.mirrored) };
  }

  /**
   * The response image (and its JSON body when asked): output.ts's renderFullSize, in a worker.
   * `giveUp`: the caller renders this job once: its model-size view's image, when in memory of
   * its own, is moved to the worker (reads as empty here afterwards), not copied. `giveUpUpload`:
   * the caller alone holds the upload and is done with it: when the render reads it and it can
   * move (move()), it is moved there and dies in the worker.
   */
  async render(job: RenderJob, giveUp = false, giveUpUpload = false): Promise<RenderResult> {
    // The PNG encode in row bands on libuv's threads: the render's own core and one per idle core (png-bands.ts).
    if (this.pngBands > 1) job = { ...job, render: { ...job.render, pngBands: Math.min(this.pngBands, 1 + Math.floor(this.idleCores())) } };
    // A lone render on a pool with idle workers is split across them in row bands (render-bands.ts).
    const bands = this.renderBands > 1 ? planBands(job, this.workersToSplitAcross(), this.renderBands) : null;
    if (bands) {
      this.rendersInBands++;
      return renderInBands(this, job, bands, (made) => this.renderWhole(made, false, giveUpUpload));
    }
    this.rendersWhole++;
    return this.renderWhole(job, giveUp, giveUpUpload);
  }

  /** render() as one task. */
  private async renderWhole(job: RenderJob, giveUp: boolean, giveUpUpload: boolean): Promise<RenderResult> {
    const parcel = new Parcel();
    const sent: RenderJob = {
      ...job,
      // The upload is decoded again only when segment() did not keep its decode.
      bytes: job.decoded ? EMPTY : giveUpUpload ? parcel.move(job.bytes) : parcel.add(job.bytes),
      decoded: job.decoded && parcel.add(job.decoded),
      mask: parcel.plan(job.mask),
      view: job.view && parcel.view(job.view, giveUp),
      hints: job.hints && parcel.add(job.hints),
      background: job.background && parcel.add(job.background),
      made: job.made && { ...job.made, alpha: parcel.add(job.made.alpha), rgba: parcel.add(job.made.rgba) },
    };
    // A lone request (every worker idle): once it has answered, its worker makes warm spares for
    // the next model-size image and message (warm-memory.ts); under load it makes none.
    const warm = this.idleWorkers() === this.threads;
    const result = await this.run<RenderResult | WorkerApiError>('render', { ...sent, warm }, parcel);
    if ('apiError' in result) throw new ApiError(result.apiError.code, { detail: result.apiError.detail, headers: result.apiError.headers });
    if (result.pngBands !== undefined) {
      if (result.pngBands > 1) this.pngsInBands++;
      else this.pngsWhole++;
    }
    return { ...result, body: asBuffer(result.body), json: result.json && asBuffer(result.json) };
  }

  /**
   * remove.bg's JSON or urlencoded body read in a worker (removebg/body-fields.ts's readBodyFields):
   * the body is moved there (not copied when it is alone in its memory, as a read body is), and
   * the decoded image moved back. Errors come back as the same ApiErrors.
   */
  async removeBgBody(raw: Buffer, kind: BodyKind, limits: UploadLimits): Promise<BodyFields> {
    const parcel = new Parcel();
    const result = await this.run<RemoveBgBodyResult | WorkerApiError>('removeBgBody', { raw: parcel.move(raw), kind, limits: { maxFileBytes: limits.maxFileBytes, maxFields: limits.maxFields, maxFieldBytes: limits.maxFieldBytes } }, parcel);
    if ('apiError' in result) throw revive(result);
    const fields: Record<string, string> = Object.create(null) as Record<string, string>;
    for (const [name, value] of Object.entries(result.fields)) fields[name] = value;
    if (!result.image) return { fields };
    if ('apiError' in result.image) return { fields, image: { error: revive(result.image) } };
    return { fields, image: { bytes: asBuffer(result.image.bytes) } };
  }

  /**
   * remove.bg's image_file_b64 from a multipart body, as its text's bytes (body-fields.ts's
   * decodeBase64Bytes), decoded in a worker: shared memory goes as it is; the image is moved back.
   */
  async decodeBase64(text: Buffer, maxBytes: number): Promise<Buffer> {
    const parcel = new Parcel();
    const result = await this.run<{ bytes: Uint8Array } | WorkerApiError>('decodeBase64', { text: parcel.move(text), maxBytes }, parcel);
    if ('apiError' in result) throw revive(result);
    return asBuffer(result.bytes);
  }

  /** The kernel counts (kernel-calls.ts) of the worker that takes this task: for tests. */
  workerKernelCalls(): Promise<Record<string, number>> {
    return this.run<Record<string, number>>('kernelCalls', null);
  }

  /** Ends the workers once the tasks given so far are done (RemoveBgHandler.close() calls it). */
  close(): Promise<void> {
    this.collector.close();
    this.sampler?.close();
    this.bandMemory.clear();
    return this.piscina.close();
  }
}

const EMPTY = Buffer.alloc(0);

function revive(error: WorkerApiError): ApiError {
  return new ApiError(error.apiError.code, { detail: error.apiError.detail, headers: error.apiError.headers });
}

/** Hand-off copies of at least this many bytes are counted (kernel-calls.ts's `handOffCopy`). */
export const HAND_OFF_COPY_COUNTED = 64 * 1024;

/**
 * A task's buffers, each copied once (memcpy) into an ArrayBuffer of its own and moved to the
 * worker in the task's transfer list. Posting them as they are would make the structured clone
 * serialize each into a growing message buffer on this thread and copy it again into the
 * worker's memory; most cannot be moved themselves (sharp's and grpc's are native memory, or a
 * view into a larger buffer, or the caller's), and the copies start at offset 0, so the worker's
 * loops read four aligned mask bytes at a time. A buffer sent twice (the mask is both the plan's
 * and the view's alpha) is copied once.
 */
class Parcel {
  readonly transferList: ArrayBuffer[] = [];
  copiedBytes = 0;
  /** Whether lend() moved the upload: the worker sends it back with its result. */
  lent = false;
  private lentGathered = false;

  /** The lent upload as it came back: the same memory, so gathered again when it was (its tail is nobody's). */
  lentBack(bytes: Uint8Array): Buffer {
    const back = asBuffer(bytes);
    return this.lentGathered ? gatheredAgain(back) : back;
  }
  private readonly copies = new Map<Buffer, Buffer>();

  add(bytes: Buffer): Buffer {
    if (bytes.length === 0) return EMPTY;
    // Shared memory (an upload of declared length, upload-bytes.ts; the model-size buffers,
    // shared-bytes.ts) reaches the worker as it is.
    if (isShared(bytes)) return bytes;
    let copy = this.copies.get(bytes);
    if (!copy) {
      // Counted (kernel-calls.ts) when large: a test checks the model-size buffers never take this path.
      if (bytes.length >= HAND_OFF_COPY_COUNTED) countKernel('handOffCopy');
      copy = Buffer.allocUnsafeSlow(bytes.length);
      bytes.copy(copy);
      this.copiedBytes += bytes.length;
      this.copies.set(bytes, copy);
      this.transferList.push(copy.buffer as ArrayBuffer);
    }
    return copy;
  }

  /**
   * `bytes` moved to the worker as they are when they are alone in their memory (a body read
   * whole: the caller gives them up), else copied as add() does.
   */
  move(bytes: Buffer): Buffer {
    if (!movable(bytes)) return this.add(bytes);
    // Sent twice (the same buffer in two fields): once, as its copy or as itself.
    const copy = this.copies.get(bytes);
    if (copy) return copy;
    if (!this.transferList.includes(bytes.buffer as ArrayBuffer)) this.transferList.push(bytes.buffer as ArrayBuffer);
    return bytes;
  }

  /**
   * An upload its caller alone holds, lent to a task that sends it back with its result
   * (`lent`): moved when it is alone in its memory or memory UploadBytes gathered (its unused
   * tail goes with it), else as add() sends it.
   */
  lend(bytes: Buffer): Buffer {
    if (!movable(bytes)) return this.add(bytes);
    this.lent = true;
    this.lentGathered = isGatheredUpload(bytes);
    if (!this.transferList.includes(bytes.buffer as ArrayBuffer)) this.transferList.push(bytes.buffer as ArrayBuffer);
    return bytes;
  }

  plan(plan: MaskPlan): MaskPlan {
    return { ...plan, grey: this.add(plan.grey), parts: plan.parts.map((part) => ({ ...part, mask: this.add(part.mask) })) };
  }

  /** `giveUp`: the view's buffers that have their memory to themselves are moved (move()), the rest added. */
  view(view: ImageView, giveUp = false): ImageView {
    return giveUp ? { ...view, rgb: this.move(view.rgb), alpha: this.move(view.alpha) } : { ...view, rgb: this.add(view.rgb), alpha: this.add(view.alpha) };
  }
}

/**
 * Whether the whole memory of `bytes` may move with them (the caller gives them up): memory of
 * their own, or an upload UploadBytes gathered (whose tail past them nobody reads).
 */
function movable(bytes: Buffer): boolean {
  if (bytes.length === 0 || isShared(bytes)) return false;
  return (bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength) || isGatheredUpload(bytes);
}

/** Typed arrays come back from a worker as Uint8Array: the same memory, as a Buffer. */
function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
