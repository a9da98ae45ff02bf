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
import { looksConfidence, mergeMasks, mirrored, objectCrop, preparePassInputs, type PassInputJob, type PassInputs } from './multi-pass.js';
import { renderFullSize, type RenderJob, type RenderResult } from './output.js';
import { collectAfterRender } from './render-garbage.js';
import { renderBand, type BandJob } from './render-bands.js';
import type { BestPasses } from './passes.js';
import { prepareModelInput, tensorOf, type ModelInput, type ModelInputJob, type PreparedModelInput } from './model-input.js';
import { isShared, sharedCopy, SharedPool } from './shared-bytes.js';
import { upscaleMask } from './tensor.js';
import { WarmSpares } from './warm-memory.js';
import { decodeRaw } from './decode.js';
import type { ImageLimits, Probe } from './pipeline.js';
import { decodeBase64Bytes, readBodyFields, type BodyKind } from '../removebg/body-fields.js';
import type { UploadLimits } from '../multipart.js';

export type { RenderJob, RenderResult } from './output.js';

const buf = (bytes: Uint8Array): Buffer => (Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));

/**
 * A result and the buffers to move with it: each must be alone in its memory (see own()) and
 * made by JavaScript (see movableCopy()). A buffer Node cannot move is not refused: the post
 * silently copies it, and the main thread then copies it again out of the message, on its
 * event loop.
 */
function reply<T>(value: T, buffers: Uint8Array[], memory: ArrayBuffer[] = []): unknown {
  const list: ArrayBuffer[] = [...memory];
  // Shared memory (shared-bytes.ts) reaches the main thread as it is: nothing to move.
  for (const b of buffers) if (!isShared(b) && b.byteOffset === 0 && b.byteLength === b.buffer.byteLength && !list.includes(b.buffer as ArrayBuffer)) list.push(b.buffer as ArrayBuffer);
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

/**
 * A copy of `bytes` in memory of its own, when it is not alone in its memory already (a view, or a
 * small buffer from Node's pool). Only for buffers JavaScript made: see movableCopy().
 */
function own(bytes: Buffer): Buffer {
  if (bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength && bytes.byteLength >= 4096) return bytes;
  return movableCopy(bytes);
}

/**
 * A copy of `bytes` in a fresh ArrayBuffer, which a post can move. For what native code made: the
 * encoders' output (sharp's, @napi-rs/image's) is memory with a native deleter, which Node's
 * postMessage does not move even when it is in the transfer list (it ignores it there and copies
 * it instead, without an error), so the encoded image was copied twice: into the message here and
 * out of it on the host's main thread, a fresh allocation and copy there of the whole image (the
 * smoke photo's 24 MP PNG is 32.8 MB): `perf` on the API's main thread found 6 ms of one
 * event-loop turn in `ValueDeserializer`'s memmove and its page faults (docs/benchmarks-history.md, "The
 * long turns by CPU, not by samples"). Copied once here, it moves.
 */
export function movableCopy(bytes: Uint8Array, memory = new ArrayBuffer(bytes.byteLength)): Buffer {
  const copy = Buffer.from(memory);
  copy.set(bytes);
  return copy;
}

export function fullSizeMask(task: { plan: MaskPlan; width: number; height: number }): unknown {
  const alpha = own(buildFullSizeMask(revivePlan(task.plan), task.width, task.height));
  return reply(alpha, [alpha]);
}

// Model-size results that go on to other tasks (merges, the confidence count, the render) come
// back in shared memory (shared-bytes.ts): handed on from the main thread without a copy there.
export async function mergeMasks_(task: { masks: Uint8Array[]; how: BestPasses['mirrorMerge']; mirrorLast?: { width: number; height: number } }): Promise<unknown> {
  const masks = task.masks.map(buf);
  // The mirror pass's mask, mirrored back by libvips here rather than on the main thread (its
  // output would be copied there to come here).
  if (task.mirrorLast) masks.push(await mirrored(masks.pop()!, task.mirrorLast.width, task.mirrorLast.height, 1));
  return reply(sharedCopy(mergeMasks(masks, task.how)), []);
}
export { mergeMasks_ as mergeMasks };

export function upscale(task: { src: Uint8Array; srcWidth: number; srcHeight: number; width: number; height: number }): unknown {
  return reply(sharedCopy(upscaleMask(buf(task.src), task.srcWidth, task.srcHeight, task.width, task.height)), []);
}
export { upscale as upscaleMask };

export function looksConfidence_(task: { whole: Uint8Array; w: number; h: number; looks: Look[]; laidFrom: number }): unknown {
  const looks = task.looks.map((look) => ({ ...look, mask: buf(look.mask) }));
  return reply(looksConfidence(buf(task.whole), task.w, task.h, looks, task.laidFrom), []);
}
export { looksConfidence_ as looksConfidence };

export async function workingView_(task: { view: ImageView; width: number; height: number }): Promise<unknown> {
  const small = await workingView({ ...task.view, rgb: buf(task.view.rgb), alpha: buf(task.view.alpha) }, task.width, task.height);
  return reply({ ...small, rgb: sharedCopy(small.rgb), alpha: sharedCopy(small.alpha) }, []);
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

/**
 * The full-size decodes of small photos (segment()'s decode-once: under twice the model's size),
 * copied into shared memory by modelInput and taken back after their render (shared-bytes.ts).
 * Two 1 MP decodes, one being rendered while the next request's is made; 8 MiB at most.
 */
const decodes = new SharedPool(8 * 1024 * 1024);

export async function render(job: RenderJob & { warm?: boolean }): Promise<unknown> {
  try {
    return await renderTask(job);
  } finally {
    // The render wrote the decode in place and is done with it; the main thread gave it up when
    // it sent it here (output.ts's renderOutput empties the segmentation's), and a segmentation
    // is rendered once: the next request's decode may be copied into it.
    decodes.giveBack(job.decoded);
    // A lone request's render is its last task: the next request's model-size image and message
    // are mapped now, after the answer went, while the next upload arrives (warm-memory.ts).
    if (job.warm) setImmediate(() => spares.refill());
  }
}

async function renderTask(job: RenderJob): Promise<unknown> {
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
      made: job.made && { ...job.made, alpha: buf(job.made.alpha), rgba: buf(job.made.rgba) },
    });
  } catch (error) {
    collectAfterRender(job.probe.width * job.probe.height);
    // A corrupt image found by the full-size decode answers 400 as before, not 500.
    if (error instanceof ApiError) return reply<WorkerApiError>({ apiError: { code: error.code, detail: error.message, headers: error.headers } }, []);
    throw error;
  }
  // `response=json`: the main thread sends the JSON alone, which holds the image in base64, so
  // the image is not moved there too. Each large buffer that reaches the main thread is external
  // memory to its heap, and V8 collects that heap (a full collection, on the event loop) once
  // enough of it has come since the last: a 24 MP answer's image and JSON were about 1.3 + 1 of it.
  // The JSON is made by JavaScript (json-with-base64.ts) and moves as it is; the encoder's image
  // is copied into memory that moves (movableCopy), before the collection below, which then frees
  // the encoder's own buffer with the render's others.
  const moved = result.json ? { ...result, body: Buffer.alloc(0), bodyBytes: result.body.length, json: own(result.json) } : { ...result, body: movableCopy(result.body) };
  result = moved;
  // This render's full-size buffers and the PNG encoder's copy go now, not at the next render
  // (render-garbage.ts); the result is alive and moves to the main thread.
  collectAfterRender(job.probe.width * job.probe.height);
  return reply(moved, [moved.json ?? moved.body]);
}

/** One row band of a split render (render-bands.ts): written into the shared buffers it was given. */
export async function renderBand_(job: BandJob): Promise<unknown> {
  const view = job.view && { ...job.view, rgb: buf(job.view.rgb), alpha: buf(job.view.alpha) };
  return reply(await renderBand({ ...job, grey: buf(job.grey), decoded: buf(job.decoded), alpha: buf(job.alpha), rgba: buf(job.rgba), view }), []);
}
export { renderBand_ as renderBand };

/**
 * This worker's warm spares (warm-memory.ts): at most one model-size image and one message of
 * each size; 16 MiB covers both for an FP32 model at 1024x1024 (12 MiB message, 3 MiB image).
 */
const spares = new WarmSpares(16 * 1024 * 1024);

export async function modelInput(job: ModelInputJob & { lent?: boolean }): Promise<unknown> {
  let prepared: PreparedModelInput;
  const movable = job.modelImage === 'movable';
  try {
    // An image the JS enlarge writes (a photo under the model's size on an axis) is written
    // into the memory it goes back in at once (shared, or its own to move), not into a buffer
    // copied there below. It and the message are in warm spares when there are (any task takes
    // them; only a lone request's makes the next ones: warm-memory.ts).
    prepared = await prepareModelInput({ ...job, bytes: buf(job.bytes), prefix: job.prefix }, movable ? warmOwnBuffer : warmSharedBuffer, (length) => spares.take('own', length));
  } catch (error) {
    if (error instanceof ApiError) return reply<WorkerApiError>({ apiError: { code: error.code, detail: error.message, headers: error.headers } }, []);
    throw error;
  }
  // sharp's buffers cannot move: copied here, in the worker, into shared memory (shared-bytes.ts),
  // which every later task that reads them (the working view, the render, `best`'s passes) gets
  // without a copy on the main thread; or, for a caller that hands the model-size image to one
  // task only (`movable`), into memory of its own, moved to the main thread and on to that task.
  // The message (or a tensor without one) is a fresh ArrayBuffer, moved as it is (the main thread
  // moves the message on to the inference thread); an 8-bit NHWC tensor without a message views
  // the model-size decode, so it views the copy instead.
  // A movable model-size image is moved as memory of its own (a copy only of sharp's buffers:
  // own() alone would hand sharp's on, which the post then copies on the main thread; movableCopy()).
  const rgb = movable ? (madeHere.has(prepared.rgb.buffer) ? prepared.rgb : movableCopy(prepared.rgb, spares.take('own', prepared.rgb.byteLength))) : sharedCopy(prepared.rgb);
  // A small photo's full-size decode goes into memory a finished render gave back (`decodes`).
  // (Copied while libvips resized it instead, it would leave the step's critical path, 0.3 ms of
  // it: not resolved against the noise of a 2-core box, so left as it was; docs/benchmarks.md.)
  const decoded = prepared.decoded && decodes.copy(prepared.decoded);
  const viewsRgb = tensorOf(prepared.input).buffer === prepared.rgb.buffer;
  const input = viewsRgb ? new Uint8Array(rgb.buffer, rgb.byteOffset, rgb.byteLength) : prepared.input;
  // A lent upload (pixel-pool.ts's lend()) goes back with the result, its whole memory moved.
  const lentBack = job.lent ? { bytes: job.bytes } : {};
  return reply({ ...prepared, input, rgb, decoded, ...lentBack }, movable ? [rgb] : [], [...(viewsRgb ? [] : movableMemory(tensorOf(input))), ...lentMemory(job)]);
}

/** The memory of an upload the main thread lent this task, to move back with the result. */
const lentMemory = (job: { bytes: Uint8Array; lent?: boolean }): ArrayBuffer[] => (job.lent && job.bytes.buffer instanceof ArrayBuffer ? [job.bytes.buffer] : []);

/**
 * The upright full-size decode (decode.ts's decodeRaw), made while the model runs (pipeline.ts's
 * segment()): into shared memory (the decodes' pool), which the render then writes in place and
 * gives back, as it does modelInput's `decoded`.
 */
export async function fullDecode(job: { bytes: Uint8Array; probe: Probe; limits: ImageLimits; lent?: boolean }): Promise<unknown> {
  const started = performance.now();
  try {
    // In the decodes' shared pool, as modelInput's decode-once copy: the render gives it back.
    const decoded = decodes.copy(await decodeRaw(buf(job.bytes), job.probe, job.limits));
    return reply({ decoded, decodeMs: performance.now() - started, ...(job.lent ? { bytes: job.bytes } : {}) }, [], lentMemory(job));
  } catch (error) {
    if (error instanceof ApiError) return reply<WorkerApiError>({ apiError: { code: error.code, detail: error.message, headers: error.headers } }, []);
    throw error;
  }
}

/** Memory warmOwnBuffer() made (JavaScript's, so movable), as against sharp's. */
const madeHere = new WeakSet<ArrayBufferLike>();

/** A new buffer of `length` bytes in memory of its own (movable), a warm spare when there is one (warm-memory.ts). */
const warmOwnBuffer = (length: number): Buffer => {
  const memory = spares.take('own', length);
  madeHere.add(memory);
  return Buffer.from(memory);
};

/** A new buffer of `length` bytes in shared memory, a warm spare when there is one. */
const warmSharedBuffer = (length: number): Buffer => Buffer.from(spares.take('shared', length));

/** The memory of a model input to move to the main thread: none when it is shared (a message: infer-request-message.ts). */
const movableMemory = (tensor: Uint8Array | Float32Array): ArrayBuffer[] => (tensor.buffer instanceof SharedArrayBuffer ? [] : [tensor.buffer as ArrayBuffer]);

/**
 * A model input that can be moved to the main thread: a message or tensor in a fresh ArrayBuffer
 * as it is; a tensor that views `rgb` (an 8-bit NHWC model without a message) copied out first.
 */
function movableInput(input: ModelInput, rgb: Buffer): ModelInput {
  if (tensorOf(input).buffer !== rgb.buffer) return input;
  const copy = new Uint8Array(new ArrayBuffer(rgb.length));
  copy.set(rgb);
  return copy;
}

/** `best`'s crop, mirror and scale passes: their model inputs (multi-pass.ts's preparePassInputs), made and written here and moved. */
export async function passInputs(job: PassInputJob): Promise<unknown> {
  const source = 'rgb' in job.source ? { rgb: buf(job.source.rgb) } : { ...job.source, bytes: buf(job.source.bytes) };
  let made: PassInputs;
  try {
    made = await preparePassInputs({ ...job, source });
  } catch (error) {
    if (error instanceof ApiError) return reply<WorkerApiError>({ apiError: { code: error.code, detail: error.message, headers: error.headers } }, []);
    throw error;
  }
  const out: PassInputs = { rgb: EMPTY };
  const moved: ArrayBuffer[] = [];
  for (const which of ['plain', 'mirrored'] as const) {
    const input = made[which];
    if (!input) continue;
    out[which] = movableInput(input, made.rgb);
    moved.push(...movableMemory(tensorOf(out[which])));
  }
  return reply(out, [], moved);
}

const EMPTY = Buffer.alloc(0);

/** What removeBgBody answers: the fields, and the image or the ApiError its decode raised (body-fields.ts). */
export interface RemoveBgBodyResult {
  fields: Record<string, string>;
  image?: { bytes: Uint8Array } | WorkerApiError;
}

/** remove.bg's JSON or urlencoded body (body-fields.ts): parsed and its base64 image decoded here; the image is moved back. */
export function removeBgBody(task: { raw: Uint8Array; kind: BodyKind; limits: UploadLimits }): unknown {
  let read: ReturnType<typeof readBodyFields>;
  try {
    read = readBodyFields(buf(task.raw), task.kind, task.limits);
  } catch (error) {
    if (error instanceof ApiError) return reply<WorkerApiError>(asWorkerError(error), []);
    throw error;
  }
  // A null-prototype object clones as a plain one: the fields go as entries' pairs.
  const fields = { ...read.fields };
  if (!read.image) return reply<RemoveBgBodyResult>({ fields }, []);
  if ('error' in read.image) return reply<RemoveBgBodyResult>({ fields, image: asWorkerError(read.image.error) }, []);
  const bytes = own(read.image.bytes);
  return reply<RemoveBgBodyResult>({ fields, image: { bytes } }, [bytes]);
}

/** A multipart image_file_b64's bytes decoded (body-fields.ts's decodeBase64Bytes); the image is moved back. */
export function decodeBase64(task: { text: Uint8Array; maxBytes: number }): unknown {
  try {
    const bytes = own(decodeBase64Bytes(task.text, task.maxBytes));
    return reply<{ bytes: Uint8Array }>({ bytes }, [bytes]);
  } catch (error) {
    if (error instanceof ApiError) return reply<WorkerApiError>(asWorkerError(error), []);
    throw error;
  }
}

function asWorkerError(error: ApiError): WorkerApiError {
  return { apiError: { code: error.code, detail: error.message, headers: error.headers } };
}

export function kernelCalls_(): unknown {
  return reply({ ...kernelCalls }, []);
}
export { kernelCalls_ as kernelCalls };

function revivePlan(plan: MaskPlan): MaskPlan {
  return { ...plan, grey: buf(plan.grey), parts: plan.parts.map((part) => ({ ...part, mask: buf(part.mask) })) };
}
