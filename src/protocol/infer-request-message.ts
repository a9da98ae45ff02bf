/**
 * ModelInfer requests whose input tensor is written into the message once.
 *
 * protobufjs (through @grpc/proto-loader) encodes a request by copying each `raw_input_contents`
 * entry into its writer's buffer, and grpc-js then copies the encoded message again into its
 * frame (5 bytes of length prefix + the message). Here the message is laid out ahead of time:
 * the request's other fields (model name, id, parameters, inputs, outputs; small) are encoded by
 * protobufjs, followed by field 7's tag and the tensor's length, and the tensor itself is written
 * in place behind them by the caller (tensor.ts's imageToTensor, or the pixel pool's worker). The
 * client's serializer (inferenceServiceClient) sends such a message as it is. grpc-js's framing
 * copy remains: it has no supported way to frame a message in place.
 *
 * A protobuf message may list its fields in any order and a repeated field in several pieces;
 * protobufjs itself writes fields in number order, so these bytes are the same as its own
 * encoding of the same request (test/infer-request-message.test.ts decodes and compares them).
 */
import type * as grpc from '@grpc/grpc-js';
import type { ModelInferRequest } from './generated/inference/ModelInferRequest.js';
import { modelInferMessages } from './message-counts.js';
import { varint } from './varint.js';

/** `raw_input_contents` (field 7), length-delimited (wire type 2): the tag byte before each tensor. */
const RAW_INPUT_CONTENTS_TAG = (7 << 3) | 2;

/** Byte alignment of the tensor inside the message buffer: a Float32Array (or Float64Array) may view it. */
export const TENSOR_ALIGNMENT = 8;

/** A ModelInfer request already encoded: the client's serializer sends `bytes` without a copy. */
export class EncodedInferRequest {
  constructor(readonly bytes: Buffer) {}
}

/** A request's fields other than its raw tensor contents (encoded by protobufjs: a few dozen bytes). */
export type InferRequestHeader = Omit<ModelInferRequest, 'rawInputContents'>;

/**
 * The bytes that go before one raw input tensor of `tensorBytes` bytes in a ModelInfer message:
 * the header's fields, then field 7's tag and the tensor's length as a varint.
 */
export function inferRequestPrefix(encodeRequest: grpc.serialize<ModelInferRequest>, header: InferRequestHeader, tensorBytes: number): Uint8Array {
  if (!Number.isSafeInteger(tensorBytes) || tensorBytes < 0) throw new RangeError('tensorBytes must be a non-negative integer');
  const fields = encodeRequest({ ...header, rawInputContents: [] });
  const length = varint(tensorBytes);
  const prefix = new Uint8Array(fields.length + 1 + length.length);
  prefix.set(fields, 0);
  prefix[fields.length] = RAW_INPUT_CONTENTS_TAG;
  prefix.set(length, fields.length + 1);
  return prefix;
}

/**
 * A message buffer of `prefix` then room for the tensor, in a fresh ArrayBuffer of its own (so a
 * pixel worker can move it to the main thread): `message` is what is sent, `tensor` the bytes to
 * fill, at an offset aligned to TENSOR_ALIGNMENT (the ArrayBuffer starts with up to 7 unused bytes
 * for that). Not shared memory: a SharedArrayBuffer lives until every thread that saw it (the
 * pixel worker, the main thread, the inference thread) has collected its handle, and none of them
 * counts it toward a collection, so under a burst of 12 MP cutouts the dead messages piled up
 * (API peak ~440 vs ~340 MB: docs/benchmarks-history.md, "Sixth round").
 */
export function allocateInferMessage(
  prefix: Uint8Array,
  tensorBytes: number,
  /**
   * Where the ArrayBuffer comes from (zeroed, of the length asked): a pixel worker's warm spare
   * (core/image/warm-memory.ts). Default: a fresh one.
   */
  memoryOf: (bytes: number) => ArrayBuffer = (bytes) => new ArrayBuffer(bytes),
): { message: Buffer; tensor: Uint8Array } {
  const pad = (TENSOR_ALIGNMENT - (prefix.length % TENSOR_ALIGNMENT)) % TENSOR_ALIGNMENT;
  const length = pad + prefix.length + tensorBytes;
  const memory = memoryOf(length);
  if (memory.byteLength !== length) throw new RangeError(`the message needs ${length} bytes, its memory has ${memory.byteLength}`);
  const message = Buffer.from(memory, pad, prefix.length + tensorBytes);
  message.set(prefix, 0);
  return { message, tensor: new Uint8Array(memory, pad + prefix.length, tensorBytes) };
}

/** Whether `message` starts with `prefix` (the client checks a message was laid out for its call). */
export function startsWithPrefix(message: Uint8Array, prefix: Uint8Array): boolean {
  if (message.length < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (message[i] !== prefix[i]) return false;
  return true;
}

/**
 * The ModelInfer request serializer: an EncodedInferRequest as it is, anything else (a request
 * object) through protobufjs as before.
 */
export function inferRequestSerializer(encodeRequest: grpc.serialize<ModelInferRequest>): grpc.serialize<ModelInferRequest | EncodedInferRequest> {
  return (value) => {
    modelInferMessages.encoded++;
    return value instanceof EncodedInferRequest ? value.bytes : encodeRequest(value);
  };
}
