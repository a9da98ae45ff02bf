/**
 * The model's input for one call: the image at the model's size, made into its tensor, written
 * straight into the request message the call sends when the model says what goes before it.
 */
import { allocateInferMessage } from '../../protocol/infer-request-message.js';
import type { PreprocessingProfile } from './profile.js';
import { imageToTensor, tensorBytes, type InputTensor } from './tensor.js';

/**
 * A tensor laid out in its request message: `message` is sent as it is (the call's prefix, then
 * the tensor); `tensor` views the tensor's bytes inside it.
 */
export interface FramedTensor {
  message: Buffer;
  tensor: InputTensor;
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
export function modelInput(rgb: Buffer, profile: PreprocessingProfile, prefix?: Uint8Array): ModelInput {
  if (!prefix) return imageToTensor(rgb, profile);
  const { message, tensor } = allocateInferMessage(prefix, tensorBytes(profile));
  return { message, tensor: imageToTensor(rgb, profile, tensor) };
}
