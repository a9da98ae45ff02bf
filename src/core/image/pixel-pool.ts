import os from 'node:os';
import { Piscina } from 'piscina';
import { ApiError } from '../errors.js';
import type { Look } from './confidence.js';
import type { ImageView } from './foreground.js';
import type { MaskPlan } from './full-size-mask.js';
import { isFramed, type ModelInputJob, type PreparedModelInput } from './model-input.js';
import type { BestPasses, Region } from './passes.js';
import type { RenderJob, RenderResult, WorkerApiError } from './pixel-worker.js';

/**
 * The threads that run the pixel loops written in JavaScript (full-size mask, foreground colour,
 * composition, foreground box; `best`'s mask merges), so none of them blocks the host's event
 * loop: a bounded piscina pool. Decoding, resizing, mirroring and encoding are libvips's (sharp),
 * on libuv's thread pool, already off the loop.
 *
 * Memory: a task's inputs are the upload and model-size buffers (copied: a few MB at most) and
 * its outputs are moved back, not copied; the full-size colour and mask are made, used and
 * dropped inside the worker, so a request holds each full-size buffer once, as before. Tasks
 * wait in piscina's queue; how many requests render at once is bounded before that, by the
 * handler's pixel budget (`limits.maxPixelsInProcess`).
 */
export interface PixelPoolOptions {
  /** Worker threads; default defaultPixelThreads(). */
  threads?: number;
  /** Milliseconds an idle worker (past the first) lives. Default 30 000. */
  idleTimeoutMs?: number;
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

  constructor(options: PixelPoolOptions = {}) {
    this.threads = options.threads ?? defaultPixelThreads();
    if (!Number.isInteger(this.threads) || this.threads < 1 || this.threads > 256) throw new RangeError('pixel pool threads must be an integer in 1..256');
    this.piscina = new Piscina({
      filename: PIXEL_WORKER_FILE,
      minThreads: 1,
      maxThreads: this.threads,
      idleTimeout: options.idleTimeoutMs ?? 30_000,
      // Tasks await sharp inside the worker: its event loop must run between them.
      atomics: 'async',
    });
  }

  private async run<T>(name: string, task: unknown): Promise<T> {
    const { value, threadId } = (await this.piscina.run(task, { name })) as { value: T; threadId: number };
    this.ranIn.add(threadId);
    return value;
  }

  /** The full-size mask of a plan (buildFullSizeMask). */
  async fullSizeMask(plan: MaskPlan, width: number, height: number): Promise<Buffer> {
    return asBuffer(await this.run<Uint8Array>('fullSizeMask', { plan, width, height }));
  }

  /** mergeMasks of multi-pass.ts. */
  async mergeMasks(masks: Buffer[], how: BestPasses['mirrorMerge']): Promise<Buffer> {
    return asBuffer(await this.run<Uint8Array>('mergeMasks', { masks, how }));
  }

  /** upscaleMask of tensor.ts. */
  async upscaleMask(src: Buffer, srcWidth: number, srcHeight: number, width: number, height: number): Promise<Buffer> {
    return asBuffer(await this.run<Uint8Array>('upscaleMask', { src, srcWidth, srcHeight, width, height }));
  }

  /** looksConfidence of multi-pass.ts. */
  looksConfidence(whole: Buffer, w: number, h: number, looks: Look[], laidFrom: number): Promise<number> {
    return this.run<number>('looksConfidence', { whole, w, h, looks, laidFrom });
  }

  /** workingView of foreground.ts. */
  async workingView(view: ImageView, width: number, height: number): Promise<ImageView> {
    const small = await this.run<ImageView>('workingView', { view, width, height });
    return { ...small, rgb: asBuffer(small.rgb), alpha: asBuffer(small.alpha) };
  }

  /** objectCrop of multi-pass.ts. */
  objectCrop(mask: Buffer, mw: number, mh: number, width: number, height: number, margin: number, maxArea: number): Promise<Region | null> {
    return this.run<Region | null>('objectCrop', { mask, mw, mh, width, height, margin, maxArea });
  }

  /**
   * prepareModelInput of model-input.ts: the model-size decode and the tensor, written into the
   * model call's message when the job has its prefix. The upload is copied to the worker (as for
   * render()); what comes back is moved, not copied.
   */
  async modelInput(job: ModelInputJob): Promise<PreparedModelInput> {
    const result = await this.run<PreparedModelInput | WorkerApiError>('modelInput', job);
    if ('apiError' in result) throw new ApiError(result.apiError.code, { detail: result.apiError.detail, headers: result.apiError.headers });
    const input = isFramed(result.input) ? { ...result.input, message: asBuffer(result.input.message) } : result.input;
    return { ...result, input, rgb: asBuffer(result.rgb), decoded: result.decoded && asBuffer(result.decoded) };
  }

  /** The response image (and its JSON body when asked): output.ts's renderFullSize, in a worker. */
  async render(job: RenderJob): Promise<RenderResult> {
    const result = await this.run<RenderResult | WorkerApiError>('render', job);
    if ('apiError' in result) throw new ApiError(result.apiError.code, { detail: result.apiError.detail, headers: result.apiError.headers });
    return { ...result, body: asBuffer(result.body), json: result.json && asBuffer(result.json) };
  }

  /** The kernel counts (kernel-calls.ts) of the worker that takes this task: for tests. */
  workerKernelCalls(): Promise<Record<string, number>> {
    return this.run<Record<string, number>>('kernelCalls', null);
  }

  /** Ends the workers once the tasks given so far are done (RemoveBgHandler.close() calls it). */
  close(): Promise<void> {
    return this.piscina.close();
  }
}

/** Typed arrays come back from a worker as Uint8Array: the same memory, as a Buffer. */
function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
