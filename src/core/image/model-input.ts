/**
 * The model's input for one call: the image at the model's size, made into its tensor, written
 * straight into the request message the call sends when the model says what goes before it.
 */
import { allocateInferMessage } from '../../protocol/infer-request-message.js';
import { decodeForModel, decodeRaw } from './decode.js';
import { countKernel } from './kernel-calls.js';
import type { ImageLimits, Probe } from './pipeline.js';
import type { PreprocessingProfile } from './profile.js';
import { imageToTensor, tensorBytes, type InputTensor } from './tensor.js';

/**
 * A tensor laid out in its request message: `message` is sent as it is (the call's prefix, then
 * the tensor); `tensor` views the tensor's bytes inside it.
 */
export interface FramedTensor {
  message: Buffer;
  tensor: InputTensor;
  /**
   * The message's memory is this one call's alone (the pixel pool made it for the call): the
   * inference client moves it to the inference thread instead of copying it there, and it reads
   * as empty here from then on. Left out: the caller's message is copied and stays usable.
   */
  sendOnce?: boolean;
}

/** What a model call takes: a tensor of its own, or one already in its message. */
export type ModelInput = InputTensor | FramedTensor;

export const isFramed = (input: ModelInput): input is FramedTensor => 'message' in input;

/** The tensor of an input, framed or not. */
export const tensorOf = (input: ModelInput): InputTensor => (isFramed(input) ? input.tensor : input);

/**
 * `rgb` (interleaved, at the profile's size) as the model's input: with `prefix` (the bytes the
 * model's call puts before its tensor), the tensor is written once, into a fresh message buffer
 * behind them; without, into memory of its own (or none, for an 8-bit NHWC model).
 */
export function modelInput(rgb: Buffer, profile: PreprocessingProfile, prefix?: Uint8Array, messageMemory?: (bytes: number) => ArrayBuffer): ModelInput {
  if (!prefix) return imageToTensor(rgb, profile);
  const { message, tensor } = allocateInferMessage(prefix, tensorBytes(profile), messageMemory);
  return { message, tensor: imageToTensor(rgb, profile, tensor) };
}

/** What prepareModelInput works from: the accepted upload, and the model call's prefix when it has one. */
export interface ModelInputJob {
  bytes: Buffer;
  probe: Probe;
  limits: ImageLimits;
  /** The profile at the size of this call. */
  profile: PreprocessingProfile;
  prefix?: Uint8Array | undefined;
  /** Also decode the full size, once, and resize from it (a small upright opaque JPEG: see segment()). */
  decodeOnce: boolean;
  /**
   * Where the pool puts the model-size image (`rgb`): `shared` (the default), for a caller that
   * hands it to several tasks (`best`'s passes); `movable`, memory of its own moved to the caller,
   * for one that gives it to one task (the working view or the render) and moves it there. Shared
   * memory lives until every thread that saw it collected its handle, and the host's thread
   * rarely collects: 16 concurrent 12 MP uploads left ~48 MB of finished requests' model-size
   * images held by it (docs/benchmarks-history.md, "Seventh round").
   */
  modelImage?: 'shared' | 'movable';
}

/** The model's input for an upload, and what was made on the way. */
export interface PreparedModelInput {
  input: ModelInput;
  /** The image at the model's size (interleaved RGB). */
  rgb: Buffer;
  /** The upright full-size decode, when decodeOnce made it. */
  decoded?: Buffer | undefined;
  decodeMs: number;
  preprocessMs: number;
}

/**
 * The step before a model call: the upload decoded to the model's size, then made its input
 * (written into the call's message when there is a prefix). segment() runs it in the pixel pool's
 * worker (pixel-worker.ts), so the tensor's bytes are written there and only moved to the host's
 * main thread, or here when it has no pool.
 */
export async function prepareModelInput(
  job: ModelInputJob,
  /**
   * Memory for the model-size image where this step writes it itself (an axis that grows, see
   * fill-resize.ts): the pool's worker gives shared memory, which it would copy the image into
   * otherwise. sharp's own outputs are its buffers whatever this says.
   */
  allocate?: (bytes: number) => Buffer,
  /** Memory for the call's message (allocateInferMessage's `memoryOf`): the pool's worker gives a warm spare (warm-memory.ts). */
  messageMemory?: (bytes: number) => ArrayBuffer,
): Promise<PreparedModelInput> {
  countKernel('prepareModelInput');
  const started = performance.now();
  const decoded = job.decodeOnce ? await decodeRaw(job.bytes, job.probe, job.limits) : undefined;
  const rgb = await decodeForModel(job.bytes, job.probe, job.limits, job.profile, decoded, allocate);
  const decodeMs = performance.now() - started;
  const input = modelInput(rgb, job.profile, job.prefix, messageMemory);
  return { input, rgb, decoded, decodeMs, preprocessMs: performance.now() - started - decodeMs };
}
