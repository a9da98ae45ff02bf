/**
 * Input tensors moved to the session worker inside the very buffer grpc-js received them in,
 * instead of copied out of it on the main thread.
 *
 * grpc-js (1.14) gathers each incoming message into a fresh `Buffer.concat` of exactly its 5-byte
 * frame header plus the message, and hands the deserializer `subarray(5)` of it (a gzip-compressed
 * message: a fresh `Buffer.concat` of the decompressed bytes, at offset 0). protobufjs decodes a
 * `bytes` field of a Buffer as a view of it (`Buffer#slice`), so `raw_input_contents` already
 * lies inside that buffer. Nothing else holds it once the request is decoded: the whole
 * ArrayBuffer (a few dozen bytes of header around the tensor) can go to the worker in the
 * transfer list. The ModelInfer deserializer below marks the buffers where that is so; a buffer
 * that could be shared (Node's pool for small allocations, or a layout a later grpc-js might use)
 * is never marked, and its tensor is copied as before.
 */
import type * as grpc from '@grpc/grpc-js';

/** grpc-js's frame header: compressed flag (1 byte) and message length (4 bytes). */
const FRAME_HEADER_BYTES = 5;

/** ArrayBuffers holding one received message and nothing else. */
const wholeMessageBuffers = new WeakSet<ArrayBuffer>();

/** Whether `message` fills its own ArrayBuffer (after grpc-js's frame header at most). */
export function ownsItsBuffer(message: Uint8Array): boolean {
  const buffer = message.buffer;
  if (!(buffer instanceof ArrayBuffer)) return false; // a SharedArrayBuffer is never moved
  // Node serves allocations under half its pool size from one shared ArrayBuffer of poolSize bytes.
  if (buffer.byteLength <= Buffer.poolSize) return false;
  return (message.byteOffset === 0 || message.byteOffset === FRAME_HEADER_BYTES) && message.byteOffset + message.byteLength === buffer.byteLength;
}

/** `deserialize`, first marking the message's buffer as movable when it holds that message alone. */
export function markingDeserializer<T>(deserialize: grpc.deserialize<T>): grpc.deserialize<T> {
  return (message) => {
    if (ownsItsBuffer(message)) wholeMessageBuffers.add(message.buffer as ArrayBuffer);
    return deserialize(message);
  };
}

/**
 * A tensor's bytes, as `data` (+ offset and length) to transfer to a worker: the received
 * message's own buffer when it was marked and the tensor sits at an offset `alignment` divides
 * (a typed array of the tensor's type views it in place), else a copy. A buffer is handed out
 * once: a second input of the same message is copied (before the first one moves).
 */
export function movableTensor(bytes: Uint8Array, alignment: number): { data: ArrayBuffer; byteOffset: number; byteLength: number } {
  const buffer = bytes.buffer as ArrayBuffer;
  if (wholeMessageBuffers.has(buffer) && bytes.byteOffset % alignment === 0) {
    wholeMessageBuffers.delete(buffer);
    return { data: buffer, byteOffset: bytes.byteOffset, byteLength: bytes.byteLength };
  }
  const data = new ArrayBuffer(bytes.byteLength);
  new Uint8Array(data).set(bytes);
  return { data, byteOffset: 0, byteLength: bytes.byteLength };
}
