/**
 * ModelInfer answers whose output tensors are written into the message once: the mirror of
 * infer-request-message.ts on the server's side.
 *
 * protobufjs encodes an answer by copying each `raw_output_contents` entry into a fresh buffer of
 * its own, and grpc-js then copies that into its frame. Here the session worker, which copies each
 * output out of onnxruntime's memory anyway, copies it into a message layout instead
 * (layOutOutputs): room for the answer's other fields (RESPONSE_HEADROOM bytes), then per output
 * field 6's tag, its length and its bytes. The main thread marks that buffer as such
 * (markLaidOut); the serializer then encodes the other fields with protobufjs (a few dozen bytes),
 * writes them just before the first tag and sends that stretch of the buffer as the message: no
 * copy of a tensor on the main thread but grpc-js's framing. Anything else (an answer whose
 * outputs were split from a batch, other fields over the headroom, an unmarked buffer) is encoded
 * by protobufjs as before. protobufjs writes fields in number order and raw_output_contents (6) is
 * the last field, so both give the same bytes (test/infer-response-message.test.ts).
 */
import type * as grpc from '@grpc/grpc-js';
import type { ModelInferResponse } from './generated/inference/ModelInferResponse.js';
import { varint } from './varint.js';

/** `raw_output_contents` (field 6), length-delimited (wire type 2). */
const RAW_OUTPUT_CONTENTS_TAG = (6 << 3) | 2;

/** Room before the first output for the answer's other fields (name, id, parameters, outputs). */
export const RESPONSE_HEADROOM = 1024;

/** Alignment of each output inside the layout, so a typed array of its type can view it. */
const OUTPUT_ALIGNMENT = 8;

/** Buffers laid out by layOutOutputs whose headroom nothing else uses. */
const laidOut = new WeakSet<ArrayBuffer>();

const varintLength = (value: number): number => varint(value).length;

function writeVarint(target: Uint8Array, at: number, value: number): number {
  const bytes = varint(value);
  target.set(bytes, at);
  return at + bytes.length;
}

/**
 * One fresh ArrayBuffer holding `outputs` as the tail of a ModelInferResponse (headroom, then per
 * output its tag, length and bytes, back to back), and where each output's bytes lie in it. The
 * headroom is sized so the first output starts at an offset OUTPUT_ALIGNMENT divides; later ones
 * need not be aligned (their views then are copied into typed arrays by whoever needs them).
 */
export function layOutOutputs(outputs: readonly Uint8Array[]): { data: ArrayBuffer; spans: { byteOffset: number; byteLength: number }[] } {
  const firstPrefix = outputs.length > 0 ? 1 + varintLength(outputs[0]!.byteLength) : 0;
  const headroom = RESPONSE_HEADROOM + ((OUTPUT_ALIGNMENT - ((RESPONSE_HEADROOM + firstPrefix) % OUTPUT_ALIGNMENT)) % OUTPUT_ALIGNMENT);
  const total = outputs.reduce((sum, o) => sum + 1 + varintLength(o.byteLength) + o.byteLength, headroom);
  const data = new ArrayBuffer(total);
  const bytes = new Uint8Array(data);
  const spans: { byteOffset: number; byteLength: number }[] = [];
  let at = headroom;
  for (const output of outputs) {
    bytes[at++] = RAW_OUTPUT_CONTENTS_TAG;
    at = writeVarint(bytes, at, output.byteLength);
    bytes.set(output, at);
    spans.push({ byteOffset: at, byteLength: output.byteLength });
    at += output.byteLength;
  }
  return { data, spans };
}

/** Marks `data` (from layOutOutputs, received from the worker) as the serializer's to write into. */
export function markLaidOut(data: ArrayBuffer): void {
  laidOut.add(data);
}

/**
 * Where the message's tail starts in the buffer, when `raw` are the outputs of one marked layout,
 * in order, each right after its own tag and length and right after the previous output.
 */
function layoutStart(raw: readonly Uint8Array[]): number | undefined {
  const buffer = raw[0]!.buffer;
  if (!(buffer instanceof ArrayBuffer) || !laidOut.has(buffer)) return undefined;
  let expected: number | undefined;
  let start = 0;
  for (const [index, output] of raw.entries()) {
    if (output.buffer !== buffer) return undefined;
    const prefix = 1 + varintLength(output.byteLength);
    const at = output.byteOffset - prefix;
    if (index === 0) start = at;
    else if (at !== expected) return undefined;
    if (at < 0) return undefined;
    expected = output.byteOffset + output.byteLength;
  }
  if (expected !== buffer.byteLength) return undefined;
  return start;
}

/** The ModelInfer answer serializer: in its workers' layout when it has one, else protobufjs. */
export function inferResponseSerializer(encode: grpc.serialize<ModelInferResponse>): grpc.serialize<ModelInferResponse> {
  return (value) => {
    const raw = (value.rawOutputContents ?? []) as Uint8Array[];
    if (raw.length === 0 || raw.some((r) => !(r instanceof Uint8Array))) return encode(value);
    const start = layoutStart(raw);
    if (start === undefined) return encode(value);
    const head = encode({ ...value, rawOutputContents: [] });
    if (head.length > start) return encode(value);
    const buffer = raw[0]!.buffer as ArrayBuffer;
    laidOut.delete(buffer); // its headroom is written once
    const message = Buffer.from(buffer, start - head.length, buffer.byteLength - (start - head.length));
    message.set(head, 0);
    return message;
  };
}
