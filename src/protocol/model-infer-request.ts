import type { ModelInferRequest } from './generated/inference/ModelInferRequest.js';

/** `raw_input_contents = 7` (repeated bytes) of ModelInferRequest: field 7, wire type 2 (length-delimited). */
const RAW_INPUT_CONTENTS_TAG = (7 << 3) | 2;

function varintLength(value: number): number {
  let n = 1;
  while (value >= 0x80) {
    value = Math.floor(value / 128);
    n++;
  }
  return n;
}

function writeVarint(out: Buffer, pos: number, value: number): number {
  while (value >= 0x80) {
    out[pos++] = (value & 0x7f) | 0x80;
    value = Math.floor(value / 128);
  }
  out[pos++] = value;
  return pos;
}

/**
 * The ModelInfer request serializer the API's gRPC client uses: the small fields (model,
 * tensors' names, datatypes, shapes, parameters) are encoded by `encodeRest` (protobufjs, as
 * proto-loader set it up) and the tensors' bytes (`raw_input_contents`, megabytes) are written
 * after them by this function, straight into the one buffer of the exact size, instead of
 * protobufjs's object conversion, length pass, operation list and copy.
 *
 * Field 7 is the message's last field, so the bytes are in field-number order, as protobuf's own
 * serializers write them; parsers accept the fields in any order anyway.
 */
export function modelInferRequestSerializer(encodeRest: (request: ModelInferRequest) => Buffer): (request: ModelInferRequest) => Buffer {
  return (request) => {
    const raw = request.rawInputContents ?? [];
    if (raw.length === 0) return encodeRest(request);
    const rest = encodeRest({ ...request, rawInputContents: [] });
    // A string is base64, as protobufjs takes `bytes` from JSON-like objects.
    const contents = raw.map((r) => (typeof r === 'string' ? Buffer.from(r, 'base64') : r));
    let size = rest.length;
    for (const bytes of contents) size += 1 + varintLength(bytes.byteLength) + bytes.byteLength;
    const out = Buffer.allocUnsafe(size);
    rest.copy(out, 0);
    let pos = rest.length;
    for (const bytes of contents) {
      out[pos++] = RAW_INPUT_CONTENTS_TAG;
      pos = writeVarint(out, pos, bytes.byteLength);
      out.set(bytes, pos);
      pos += bytes.byteLength;
    }
    return out;
  };
}
