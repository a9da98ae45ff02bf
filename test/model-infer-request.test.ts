/**
 * The API's own ModelInfer request serializer (src/protocol/model-infer-request.ts), decoded by
 * protobufjs from the published protocol's messages (written out below, not the project's proto
 * file), and compared with what protobufjs itself writes for the same request.
 */
import * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inferenceServiceClient, loadInferenceProto, modelInferRequestSerializer, type ModelInferRequest } from '../src/protocol/index.js';

// Field numbers as in the open-inference-protocol repository's grpc_predict_v2.proto.
const OIP = protobuf.parse(`
syntax = "proto3";
package inference;
message InferParameter { oneof parameter_choice { bool bool_param = 1; int64 int64_param = 2; string string_param = 3; } }
message InferTensorContents {
  repeated bool bool_contents = 1; repeated int32 int_contents = 2; repeated int64 int64_contents = 3;
  repeated uint32 uint_contents = 4; repeated uint64 uint64_contents = 5; repeated float fp32_contents = 6;
  repeated double fp64_contents = 7; repeated bytes bytes_contents = 8;
}
message ModelInferRequest {
  message InferInputTensor {
    string name = 1; string datatype = 2; repeated int64 shape = 3;
    map<string, InferParameter> parameters = 4; InferTensorContents contents = 5;
  }
  message InferRequestedOutputTensor { string name = 1; map<string, InferParameter> parameters = 2; }
  string model_name = 1; string model_version = 2; string id = 3; map<string, InferParameter> parameters = 4;
  repeated InferInputTensor inputs = 5; repeated InferRequestedOutputTensor outputs = 6;
  repeated bytes raw_input_contents = 7;
}
`).root.lookupType('inference.ModelInferRequest');

const decode = (bytes: Buffer) => OIP.toObject(OIP.decode(bytes), { longs: String, bytes: Buffer, defaults: false, arrays: true }) as Record<string, any>;
const protobufjsSerialize = loadInferenceProto().inference.GRPCInferenceService.service.ModelInfer.requestSerialize;
const serialize = modelInferRequestSerializer(protobufjsSerialize);

/** Bytes 0, 1, 2, ... (mod 251, so no run repeats at a power of two). */
function counting(n: number): Buffer {
  const bytes = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) bytes[i] = i % 251;
  return bytes;
}

const base: ModelInferRequest = {
  modelName: 'isnet',
  modelVersion: '2',
  id: 'request-7',
  parameters: { priority: { int64Param: 9_007_199_254_740_991 }, tag: { stringParam: 'ä€' }, flag: { boolParam: true } },
  inputs: [{ name: 'input', datatype: 'UINT8', shape: [1, 1024, 1024, 3], parameters: { binary: { boolParam: false } } }],
  outputs: [{ name: 'mask' }, { name: 'other', parameters: { classification: { int64Param: 3 } } }],
};

describe('ModelInfer request serializer', () => {
  // Lengths around each varint size boundary, and the 3 MiB of a 1024x1024 RGB tensor.
  it.each([0, 1, 127, 128, 16_383, 16_384, 2_097_151, 2_097_152, 3 * 1024 * 1024])('a %i-byte tensor decodes to the same bytes and fields', (length) => {
    const tensor = counting(length);
    const bytes = serialize({ ...base, rawInputContents: [tensor] });
    const decoded = decode(bytes);
    expect(decoded.rawInputContents).toHaveLength(1);
    expect(Buffer.compare(decoded.rawInputContents[0], tensor)).toBe(0);
    expect(decoded.modelName).toBe('isnet');
    expect(decoded.modelVersion).toBe('2');
    expect(decoded.id).toBe('request-7');
    expect(decoded.parameters).toEqual({ priority: { int64Param: '9007199254740991' }, tag: { stringParam: 'ä€' }, flag: { boolParam: true } });
    expect(decoded.inputs).toEqual([{ name: 'input', datatype: 'UINT8', shape: ['1', '1024', '1024', '3'], parameters: { binary: { boolParam: false } } }]);
    expect(decoded.outputs).toEqual([{ name: 'mask' }, { name: 'other', parameters: { classification: { int64Param: '3' } } }]);
    // protobufjs writes fields in number order, raw_input_contents (7) last: the same bytes.
    expect(bytes.equals(protobufjsSerialize({ ...base, rawInputContents: [tensor] }))).toBe(true);
  });

  it('writes several tensors in order, views of a larger buffer only as far as they reach, Uint8Array and base64 alike', () => {
    const backing = counting(4096);
    const view = backing.subarray(100, 300);
    const floats = new Float32Array([1.5, -2, Number.NaN, 3.25e-20]);
    const asBuffer = Buffer.from(floats.buffer, floats.byteOffset, floats.byteLength);
    const plain = new Uint8Array([9, 8, 7]);
    const request: ModelInferRequest = { ...base, rawInputContents: [view, asBuffer, plain, Buffer.from('hello').toString('base64'), Buffer.alloc(0)] };
    const decoded = decode(serialize(request));
    expect(decoded.rawInputContents.map((b: Buffer) => [...b])).toEqual([[...view], [...asBuffer], [9, 8, 7], [...Buffer.from('hello')], []]);
    expect(new Float32Array(new Uint8Array(decoded.rawInputContents[1]).buffer)).toEqual(floats);
    expect(serialize(request).equals(protobufjsSerialize(request))).toBe(true);
  });

  it('leaves a request without raw contents (typed contents, or none) to protobufjs', () => {
    const typed: ModelInferRequest = { ...base, inputs: [{ name: 'input', datatype: 'FP32', shape: [2], contents: { fp32Contents: [0.5, 2] } }] };
    expect(serialize(typed).equals(protobufjsSerialize(typed))).toBe(true);
    expect(decode(serialize(typed)).inputs[0].contents.fp32Contents).toEqual([0.5, 2]);
    expect(decode(serialize({})).modelName).toBeUndefined();
  });

  describe('as the client class sends it', () => {
    let server: grpc.Server;
    let port: number;
    const received: Buffer[] = [];
    beforeAll(async () => {
      server = new grpc.Server();
      const method = loadInferenceProto().inference.GRPCInferenceService.service.ModelInfer;
      // The server keeps the message's bytes as they arrived, to decode them with the test's own proto.
      server.addService({ ModelInfer: { ...method, requestDeserialize: (bytes: Buffer) => bytes } } as unknown as grpc.ServiceDefinition, {
        ModelInfer: (call: grpc.ServerUnaryCall<Buffer, unknown>, callback: grpc.sendUnaryData<unknown>) => {
          received.push(call.request);
          callback(null, { modelName: 'isnet', outputs: [], rawOutputContents: [] });
        },
      });
      port = await new Promise<number>((resolve, reject) =>
        server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))),
      );
    });
    afterAll(() => server.forceShutdown());

    it('puts the serializer on ModelInfer: the server receives the tensor and the fields', async () => {
      const Client = inferenceServiceClient();
      expect(Client.service.ModelInfer.requestSerialize).not.toBe(protobufjsSerialize);
      const client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
      const tensor = counting(3 * 1024 * 1024);
      await new Promise<void>((resolve, reject) =>
        client.ModelInfer({ ...base, rawInputContents: [tensor] }, { deadline: Date.now() + 10_000 }, (error) => (error ? reject(error) : resolve())),
      );
      client.close();
      const decoded = decode(received[0]!);
      expect(Buffer.compare(decoded.rawInputContents[0], tensor)).toBe(0);
      expect(decoded.inputs[0].shape).toEqual(['1', '1024', '1024', '3']);
    });
  });
});
