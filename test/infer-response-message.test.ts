/**
 * ModelInfer answers written from the session worker's message layout
 * (src/protocol/infer-response-message.ts): the bytes sent are protobufjs's own encoding of the
 * same answer (decoded with the committed proto), and the tensor is not copied on the way (the
 * message is a view of the worker's buffer); anything else falls back to protobufjs.
 */
import path from 'node:path';
import protobuf from 'protobufjs';
import { describe, expect, it } from 'vitest';
import { inferResponseSerializer, layOutOutputs, loadInferenceProto, markLaidOut, RESPONSE_HEADROOM, type ModelInferResponse } from '../src/protocol/index.js';

const ModelInferResponseType = protobuf.loadSync(path.join(import.meta.dirname, '../proto/grpc_predict_v2.proto')).lookupType('inference.ModelInferResponse');
const encode = loadInferenceProto().inference.GRPCInferenceService.service.ModelInfer.responseSerialize as (value: ModelInferResponse) => Buffer;
const serialize = inferResponseSerializer(encode);

function pattern(length: number, seed: number): Uint8Array {
  const bytes = new Uint8Array(length);
  for (let i = 0; i < length; i++) bytes[i] = (i * 37 + seed) & 0xff;
  return bytes;
}

function answer(raw: Uint8Array[], id = 'request-7'): ModelInferResponse {
  return {
    modelName: 'isnet',
    modelVersion: '1',
    id,
    parameters: { session_run_us: { int64Param: 8123 }, batch_size: { int64Param: 1 } },
    outputs: raw.map((r, i) => ({ name: `out${i}`, datatype: 'UINT8', shape: [1, r.length] })),
    rawOutputContents: raw.map((r) => Buffer.from(r.buffer, r.byteOffset, r.byteLength)),
  };
}

/** protobufjs, from the committed .proto, encoding the same answer with its own copies of the tensors. */
function protobufjsBytes(tensors: Uint8Array[], id?: string): Uint8Array {
  const value = answer(tensors.map((t) => Uint8Array.from(t)), id);
  return ModelInferResponseType.encode(ModelInferResponseType.fromObject(value)).finish();
}

function laidOutAnswer(tensors: Uint8Array[], mark = true, id?: string) {
  const { data, spans } = layOutOutputs(tensors);
  if (mark) markLaidOut(data);
  return { data, value: answer(spans.map((s) => new Uint8Array(data, s.byteOffset, s.byteLength)), id) };
}

describe('a ModelInfer answer written from the worker layout', () => {
  for (const sizes of [[300_000], [1 << 20, 1000], [127, 128, 16_384]]) {
    it(`is protobufjs's encoding of the same answer, its tensors not copied (${sizes.length} output(s), ${sizes.join(' + ')} bytes)`, () => {
      const tensors = sizes.map((n, i) => pattern(n, i + 1));
      const { data, value } = laidOutAnswer(tensors);
      const message = serialize(value);
      expect(Buffer.compare(message, protobufjsBytes(tensors))).toBe(0);
      // No copy: the message is a stretch of the worker's own buffer, ending where it ends.
      expect(message.buffer).toBe(data);
      expect(message.byteOffset + message.byteLength).toBe(data.byteLength);
      const decoded = ModelInferResponseType.toObject(ModelInferResponseType.decode(message)) as { rawOutputContents: Uint8Array[] };
      decoded.rawOutputContents.forEach((r, i) => expect(Buffer.compare(r, tensors[i]!)).toBe(0));
    });
  }

  it('puts the first output at an 8-byte-aligned offset of its buffer', () => {
    for (const n of [1, 127, 128, 300_000, 1 << 21]) expect(layOutOutputs([pattern(n, 3)]).spans[0]!.byteOffset % 8).toBe(0);
  });

  it('falls back to protobufjs (same bytes, a buffer of its own) for a layout nobody marked', () => {
    const tensors = [pattern(50_000, 9)];
    const { data, value } = laidOutAnswer(tensors, false);
    const message = serialize(value);
    expect(message.buffer).not.toBe(data);
    expect(Buffer.compare(message, protobufjsBytes(tensors))).toBe(0);
  });

  it('falls back to protobufjs when the other fields exceed the headroom (a long request id)', () => {
    const tensors = [pattern(50_000, 5)];
    const id = 'x'.repeat(RESPONSE_HEADROOM * 2);
    const { data, value } = laidOutAnswer(tensors, true, id);
    const message = serialize(value);
    expect(message.buffer).not.toBe(data);
    expect(Buffer.compare(message, protobufjsBytes(tensors, id))).toBe(0);
  });

  it('falls back to protobufjs for outputs out of layout order (they are sent in the order asked)', () => {
    const tensors = [pattern(2000, 1), pattern(3000, 2)];
    const { data, spans } = layOutOutputs(tensors);
    markLaidOut(data);
    const swapped = [spans[1]!, spans[0]!].map((s) => new Uint8Array(data, s.byteOffset, s.byteLength));
    const message = serialize(answer(swapped));
    expect(message.buffer).not.toBe(data);
    expect(Buffer.compare(message, protobufjsBytes([tensors[1]!, tensors[0]!]))).toBe(0);
  });
});
