/**
 * The pixel pool's worker (pixel-pool.ts): each export is a task. Buffers arrive as Uint8Array
 * (copies the pool moved here) and are wrapped as Buffers without a copy; results are moved back to the
 * main thread (transferred), not copied.
 */
import { threadId } from 'node:worker_threads';
import { ApiError } from '../errors.js';
import { move, transferableSymbol, valueSymbol } from 'piscina';
import type { Look } from './confidence.js';
import { workingView, type ImageView } from './foreground.js';
import { buildFullSizeMask, type MaskPlan } from './full-size-mask.js';
import { kernelCalls } from './kernel-calls.js';
import { looksConfidence, mergeMasks, objectCrop } from './multi-pass.js';
import { renderFullSize, type RenderJob, type RenderResult } from './output.js';
import { collectBeforeRender } from './render-garbage.js';
import type { BestPasses } from './passes.js';
import { prepareModelInput, tensorOf, type ModelInputJob, type PreparedModelInput } from './model-input.js';
import { inSharedMemory } from './pipeline.js';
import { upscaleMask } from './tensor.js';

export type { RenderJob, RenderResult } from './output.js';

const buf = (bytes: Uint8Array): Buffer => (Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));

/**
 * A result and the buffers to move with it. A buffer that is not alone in its memory (a small
 * one from Node's pool) or not movable (made by native code, as sharp's are) is copied instead:
 * into memory of its own when large, so the main thread gets it without a copy there.
 */
function reply<T>(value: T, buffers: Uint8Array[], memory: ArrayBuffer[] = []): unknown {
  const list: ArrayBuffer[] = [...memory];
  for (const b of buffers) if (b.byteOffset === 0 && b.byteLength === b.buffer.byteLength && !list.includes(b.buffer as ArrayBuffer)) list.push(b.buffer as ArrayBuffer);
  const wrapped = { value, threadId };
  if (list.length === 0) return wrapped;
  return move({
    get [transferableSymbol]() {
      return list;
    },
    get [valueSymbol]() {
      return wrapped;
    },
  } as never);
}

/** A copy of `bytes` in memory of its own (movable), when it is not already. */
function own(bytes: Buffer): Buffer {
  if (bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength && bytes.byteLength >= 4096) return bytes;
  const copy = Buffer.from(new ArrayBuffer(bytes.length));
  bytes.copy(copy);
  return copy;
}

export function fullSizeMask(task: { plan: MaskPlan; width: number; height: number }): unknown {
  const alpha = own(buildFullSizeMask(revivePlan(task.plan), task.width, task.height));
  return reply(alpha, [alpha]);
}

export function mergeMasks_(task: { masks: Uint8Array[]; how: BestPasses['mirrorMerge'] }): unknown {
  const out = own(mergeMasks(task.masks.map(buf), task.how));
  return reply(out, [out]);
}
export { mergeMasks_ as mergeMasks };

export function upscale(task: { src: Uint8Array; srcWidth: number; srcHeight: number; width: number; height: number }): unknown {
  const out = own(upscaleMask(buf(task.src), task.srcWidth, task.srcHeight, task.width, task.height));
  return reply(out, [out]);
}
export { upscale as upscaleMask };

export function looksConfidence_(task: { whole: Uint8Array; w: number; h: number; looks: Look[]; laidFrom: number }): unknown {
  const looks = task.looks.map((look) => ({ ...look, mask: buf(look.mask) }));
  return reply(looksConfidence(buf(task.whole), task.w, task.h, looks, task.laidFrom), []);
}
export { looksConfidence_ as looksConfidence };

export async function workingView_(task: { view: ImageView; width: number; height: number }): Promise<unknown> {
  const small = await workingView({ ...task.view, rgb: buf(task.view.rgb), alpha: buf(task.view.alpha) }, task.width, task.height);
  const rgb = own(small.rgb);
  const alpha = own(small.alpha);
  return reply({ ...small, rgb, alpha }, [rgb, alpha]);
}
export { workingView_ as workingView };

export function objectCrop_(task: { mask: Uint8Array; mw: number; mh: number; width: number; height: number; margin: number; maxArea: number }): unknown {
  return reply(objectCrop(buf(task.mask), task.mw, task.mh, task.width, task.height, task.margin, task.maxArea), []);
}
export { objectCrop_ as objectCrop };

/** An ApiError thrown in a worker, as data: a thrown error reaches the main thread as a plain Error. */
export interface WorkerApiError {
  apiError: { code: ApiError['code']; detail: string; headers: Record<string, string> };
}

export async function render(job: RenderJob): Promise<unknown> {
  // The previous renders' dead buffers go before this one's are made (render-garbage.ts).
  collectBeforeRender(job.probe.width * job.probe.height);
  let result: RenderResult;
  try {
    result = await renderFullSize({
      ...job,
      bytes: buf(job.bytes),
      decoded: job.decoded && buf(job.decoded),
      mask: revivePlan(job.mask),
      hints: job.hints && buf(job.hints),
      view: job.view && { ...job.view, rgb: buf(job.view.rgb), alpha: buf(job.view.alpha) },
      background: job.background && buf(job.background),
    });
  } catch (error) {
    // A corrupt image found by the full-size decode answers 400 as before, not 500.
    if (error instanceof ApiError) return reply<WorkerApiError>({ apiError: { code: error.code, detail: error.message, headers: error.headers } }, []);
    throw error;
  }
  const body = own(result.body);
  const json = result.json && own(result.json);
  return reply({ ...result, body, json }, json ? [body, json] : [body]);
}

export async function modelInput(job: ModelInputJob): Promise<unknown> {
  let prepared: PreparedModelInput;
  try {
    prepared = await prepareModelInput({ ...job, bytes: buf(job.bytes), prefix: job.prefix });
  } catch (error) {
    if (error instanceof ApiError) return reply<WorkerApiError>({ apiError: { code: error.code, detail: error.message, headers: error.headers } }, []);
    throw error;
  }
  // sharp's buffers cannot move: copied here, in the worker, once, into shared memory, since
  // the main thread sends them back to the render (the model-size view for foreground
  // estimation, the full-size decode) and shared memory crosses without a copy either way. The
  // message (or tensor) is a fresh ArrayBuffer already, moved as it is; an 8-bit NHWC tensor
  // without a message views the model-size decode, so it is made again over the copy.
  const rgb = inSharedMemory(prepared.rgb);
  const decoded = prepared.decoded && inSharedMemory(prepared.decoded);
  const tensor = tensorOf(prepared.input);
  const input = tensor.buffer === prepared.rgb.buffer ? new Uint8Array(rgb.buffer, rgb.byteOffset, rgb.byteLength) : prepared.input;
  const memory = tensorOf(input).buffer;
  const moved = memory instanceof SharedArrayBuffer ? [] : [memory as ArrayBuffer];
  return reply({ ...prepared, input, rgb, decoded }, [], moved);
}

export function kernelCalls_(): unknown {
  return reply({ ...kernelCalls }, []);
}
export { kernelCalls_ as kernelCalls };

function revivePlan(plan: MaskPlan): MaskPlan {
  return { ...plan, grey: buf(plan.grey), parts: plan.parts.map((part) => ({ ...part, mask: buf(part.mask) })) };
}
