/**
 * The inference server as a standard Open Inference Protocol (KServe v2) client sees it. The
 * requests are hand-built with protobufjs from the published protocol's messages, written out
 * below, not from the project's proto file or client, so the test would catch a server that only
 * understands bgcut's own client.
 */
import * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ISNET_FP32_PROFILE, ISNET_PROFILE } from '../src/core/image/profile.js';
import { InferenceClient, ModelMismatchError, readOutput } from '../src/core/inference/inference-client.js';
import { startInferenceProcess } from './helpers/inference-process.js';

// Field numbers as in the open-inference-protocol repository's grpc_predict_v2.proto.
const OIP = protobuf.parse(`
syntax = "proto3";
package inference;
message ModelReadyRequest { string name = 1; string version = 2; }
message ModelReadyResponse { bool ready = 1; }
message ModelMetadataRequest { string name = 1; string version = 2; }
message ModelMetadataResponse {
  message TensorMetadata { string name = 1; string datatype = 2; repeated int64 shape = 3; }
  string name = 1; repeated string versions = 2; string platform = 3;
  repeated TensorMetadata inputs = 4; repeated TensorMetadata outputs = 5;
  map<string, string> properties = 6;
}
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
message ModelInferResponse {
  message InferOutputTensor {
    string name = 1; string datatype = 2; repeated int64 shape = 3;
    map<string, InferParameter> parameters = 4; InferTensorContents contents = 5;
  }
  string model_name = 1; string model_version = 2; string id = 3; map<string, InferParameter> parameters = 4;
  repeated InferOutputTensor outputs = 5; repeated bytes raw_output_contents = 6;
}
`).root;

const PIXELS = 1024 * 1024 * 3;

/** One unary call of GRPCInferenceService with protobufjs doing the (de)serialisation. */
function call(client: grpc.Client, method: string, request: object, responseType: string, requestType = `${method}Request`) {
  const req = OIP.lookupType(`inference.${requestType}`);
  const res = OIP.lookupType(`inference.${responseType}`);
  return new Promise<{ error: grpc.ServiceError | null; response?: any }>((resolve) => {
    client.makeUnaryRequest(
      `/inference.GRPCInferenceService/${method}`,
      (message: object) => Buffer.from(req.encode(req.fromObject(message)).finish()),
      (bytes: Buffer) => res.toObject(res.decode(bytes), { longs: Number, defaults: true }),
      request,
      new grpc.Metadata(),
      { deadline: Date.now() + 60_000 },
      (error, response) => resolve({ error, response }),
    );
  });
}

/** A deterministic picture: a bright disc on a dark ground, as 8-bit NHWC pixels. */
function discPixels(): Buffer {
  const px = Buffer.alloc(PIXELS);
  for (let y = 0; y < 1024; y++) {
    for (let x = 0; x < 1024; x++) {
      const inside = (x - 512) ** 2 + (y - 512) ** 2 < 300 ** 2;
      const i = (y * 1024 + x) * 3;
      px[i] = inside ? 230 : 20;
      px[i + 1] = inside ? 120 : 30;
      px[i + 2] = inside ? 40 : 35;
    }
  }
  return px;
}

const imageInput = { name: 'image', datatype: 'UINT8', shape: [1, 1024, 1024, 3] };

describe('Open Inference Protocol, hand-built requests (shared server, real model)', () => {
  let client: grpc.Client;
  beforeAll(() => {
    client = new grpc.Client(inject('inferenceAddress'), grpc.credentials.createInsecure(), {
      'grpc.max_send_message_length': 64 << 20,
      'grpc.max_receive_message_length': 64 << 20,
    });
  });
  afterAll(() => client.close());

  it('metadata: numeric version "1", one UINT8 NHWC input, the mask alone as output, properties as map<string,string> (field 6)', async () => {
    const { error, response } = await call(client, 'ModelMetadata', { name: 'isnet' }, 'ModelMetadataResponse');
    expect(error).toBeNull();
    expect(response.versions).toEqual(['1']);
    expect(response.inputs).toEqual([{ name: 'image', datatype: 'UINT8', shape: [-1, -1, -1, 3] }]);
    expect(response.outputs).toEqual([{ name: 'mask', datatype: 'UINT8', shape: [-1, 1, -1, -1] }]);
    expect(response.properties.execution_provider).toBe('cpu');
  });

  it('an unknown version is NOT_FOUND on ModelInfer, ModelReady and ModelMetadata; version "1" is served', async () => {
    const infer = await call(client, 'ModelInfer', { modelName: 'isnet', modelVersion: '7', inputs: [imageInput], rawInputContents: [Buffer.alloc(PIXELS)] }, 'ModelInferResponse');
    const ready = await call(client, 'ModelReady', { name: 'isnet', version: '7' }, 'ModelReadyResponse');
    const meta = await call(client, 'ModelMetadata', { name: 'isnet', version: '7' }, 'ModelMetadataResponse');
    expect([infer.error?.code, ready.error?.code, meta.error?.code]).toEqual([grpc.status.NOT_FOUND, grpc.status.NOT_FOUND, grpc.status.NOT_FOUND]);
    const readyOne = await call(client, 'ModelReady', { name: 'isnet', version: '1' }, 'ModelReadyResponse');
    expect(readyOne.response?.ready).toBe(true);
    const unknownModel = await call(client, 'ModelReady', { name: 'nope' }, 'ModelReadyResponse');
    expect(unknownModel.error?.code).toBe(grpc.status.NOT_FOUND);
  });

  it('typed contents (uint_contents) and raw contents of the same pixels give the same mask; no outputs named returns every output', async () => {
    const pixels = discPixels();
    const typed = await call(
      client,
      'ModelInfer',
      { modelName: 'isnet', modelVersion: '1', id: 'typed', inputs: [{ ...imageInput, contents: { uintContents: [...pixels] } }] },
      'ModelInferResponse',
    );
    expect(typed.error).toBeNull();
    expect(typed.response.id).toBe('typed');
    expect(typed.response.outputs.map((o: any) => [o.name, o.datatype, o.shape])).toEqual([['mask', 'UINT8', [1, 1, 1024, 1024]]]);
    const typedMask: Buffer = typed.response.rawOutputContents[0];
    expect(typedMask.length).toBe(1024 * 1024);

    const raw = await call(client, 'ModelInfer', { modelName: 'isnet', inputs: [imageInput], outputs: [{ name: 'mask' }], rawInputContents: [pixels] }, 'ModelInferResponse');
    expect(raw.error).toBeNull();
    expect(Buffer.compare(raw.response.rawOutputContents[0], typedMask)).toBe(0);
    // The model found the disc: foreground in the middle, background in the corner.
    expect(typedMask[512 * 1024 + 512]).toBeGreaterThan(200);
    expect(typedMask[10 * 1024 + 10]).toBeLessThan(50);
  });

  it('refuses with INVALID_ARGUMENT, before any inference: raw and typed contents at once, a wrong count, a wrong field, a value out of range, an unknown output', async () => {
    const cases = {
      both: { inputs: [{ ...imageInput, contents: { uintContents: [1, 2, 3] } }], rawInputContents: [Buffer.alloc(PIXELS)] },
      count: { inputs: [{ ...imageInput, contents: { uintContents: [1, 2, 3] } }] },
      field: { inputs: [{ ...imageInput, contents: { fp32Contents: new Array(PIXELS).fill(0) } }] },
      range: { inputs: [{ ...imageInput, contents: { uintContents: new Array(PIXELS).fill(300) } }] },
      noData: { inputs: [imageInput] },
      output: { inputs: [imageInput], rawInputContents: [Buffer.alloc(PIXELS)], outputs: [{ name: 'output' }] },
      datatype: { inputs: [{ ...imageInput, datatype: 'FP32' }], rawInputContents: [Buffer.alloc(PIXELS * 4)] },
    };
    const codes: Record<string, number | undefined> = {};
    const details: Record<string, string | undefined> = {};
    for (const [name, body] of Object.entries(cases)) {
      const { error } = await call(client, 'ModelInfer', { modelName: 'isnet', ...body }, 'ModelInferResponse');
      codes[name] = error?.code;
      details[name] = error?.details;
    }
    expect(codes).toEqual(Object.fromEntries(Object.keys(cases).map((k) => [k, grpc.status.INVALID_ARGUMENT])));
    expect(details.both).toMatch(/both raw_input_contents and typed contents/);
    expect(details.range).toMatch(/out of range for UINT8/);
  });

  it('any height and width: the mask comes back at the size sent; a free dimension over maxFreeDim (2048) is INVALID_ARGUMENT', async () => {
    const [height, width] = [256, 384];
    const pixels = Buffer.alloc(height * width * 3, 255);
    // A dark square in the middle of white.
    for (let y = 64; y < 192; y++) pixels.fill(30, (y * width + 128) * 3, (y * width + 256) * 3);
    const input = { name: 'image', datatype: 'UINT8', shape: [1, height, width, 3] };
    const { error, response } = await call(client, 'ModelInfer', { modelName: 'isnet', inputs: [input], rawInputContents: [pixels] }, 'ModelInferResponse');
    expect(error).toBeNull();
    expect(response.outputs.map((o: any) => o.shape.map(Number))).toEqual([[1, 1, height, width]]);
    const mask: Buffer = response.rawOutputContents[0];
    expect(mask.length).toBe(height * width);
    expect(mask[128 * width + 192]).toBeGreaterThan(200);
    expect(mask[5 * width + 5]).toBeLessThan(50);

    const tall = { name: 'image', datatype: 'UINT8', shape: [1, 2080, 32, 3] };
    const refused = await call(client, 'ModelInfer', { modelName: 'isnet', inputs: [tall], rawInputContents: [Buffer.alloc(2080 * 32 * 3)] }, 'ModelInferResponse');
    expect(refused.error?.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(refused.error?.details).toMatch(/at most 2048/);
  }, 60_000);
});

describe("the API's model check (ready()) against the served metadata", () => {
  it('accepts the prepared profile and refuses a profile of another input datatype or layout, naming both', async () => {
    const client = new InferenceClient({ address: inject('inferenceAddress'), timeoutMs: 10_000, maxMessageBytes: 64 << 20, retryAfterSeconds: 1 });
    try {
      await client.verifyModel('isnet', ISNET_PROFILE, 10_000);
      expect(client.providers.get('isnet')).toBe('cpu');
      const fp32 = { ...ISNET_FP32_PROFILE, inputName: 'image', outputName: 'mask' };
      await expect(client.verifyModel('isnet', fp32, 10_000)).rejects.toThrow(/input "image" is UINT8\[-1,-1,-1,3\], the profile needs FP32\[1,3,1024,1024\] \(NCHW\)/);
      await expect(client.verifyModel('isnet', { ...ISNET_PROFILE, inputLayout: 'NCHW' }, 10_000)).rejects.toBeInstanceOf(ModelMismatchError);
      await expect(client.verifyModel('isnet', { ...ISNET_PROFILE, outputDatatype: 'UINT16' }, 10_000)).rejects.toThrow(/output "mask" is UINT8/);
    } finally {
      client.close();
    }
  });
});

describe("the API's client reads an answer from raw or typed contents", () => {
  const response = (tensor: object, raw: Buffer[] = []) =>
    ({ outputs: [{ name: 'mask', datatype: 'UINT8', shape: [1, 1, 2, 2], ...tensor }], rawOutputContents: raw, parameters: {} }) as never;

  it('takes typed uint_contents and raw bytes alike', () => {
    expect([...readOutput(response({ contents: { uintContents: [0, 9, 200, 255] } }), 'mask', 'UINT8').data]).toEqual([0, 9, 200, 255]);
    expect([...readOutput(response({}, [Buffer.from([0, 9, 200, 255])]), 'mask', 'UINT8').data]).toEqual([0, 9, 200, 255]);
  });

  it('refuses bytes that do not fill the shape, another datatype, and values out of range', () => {
    expect(() => readOutput(response({}, [Buffer.from([1, 2, 3])]), 'mask', 'UINT8')).toThrow(/3 bytes for shape/);
    expect(() => readOutput(response({ contents: { uintContents: [1, 2, 3] } }), 'mask', 'UINT8')).toThrow(/needs 4 values/);
    expect(() => readOutput(response({ contents: { uintContents: [1, 2, 3, 256] } }), 'mask', 'UINT8')).toThrow(/out of range/);
    expect(() => readOutput(response({}, [Buffer.alloc(4)]), 'mask', 'FP32')).toThrow(/is UINT8, expected FP32/);
  });

  it('reads FP32 masks from unaligned received bytes', () => {
    const floats = Buffer.from(new Float32Array([0, 0.25, 0.5, 1]).buffer);
    const unaligned = Buffer.concat([Buffer.alloc(1), floats]).subarray(1);
    const out = readOutput({ outputs: [{ name: 'output', datatype: 'FP32', shape: [1, 1, 2, 2] }], rawOutputContents: [unaligned], parameters: {} } as never, 'output', 'FP32');
    expect([...out.data]).toEqual([0, 0.25, 0.5, 1]);
  });
});

describe('metric labels (own instance, before its model loads)', () => {
  it('counts calls for unknown model names under one label, never the name a client sent', async () => {
    const server = await startInferenceProcess(['--metrics-port', '0'], {}, 'listening');
    try {
      const client = new grpc.Client(server.address, grpc.credentials.createInsecure());
      for (const name of ['evil-1', 'evil-2']) {
        const { error } = await call(client, 'ModelInfer', { modelName: name, inputs: [imageInput], rawInputContents: [Buffer.alloc(3)] }, 'ModelInferResponse');
        expect(error?.code).toBe(grpc.status.NOT_FOUND);
      }
      client.close();
      let port: string | undefined;
      for (let i = 0; i < 100 && !port; i++) {
        port = /metrics on http:\/\/[^:]+:(\d+)\/metrics/.exec(server.output())?.[1];
        if (!port) await new Promise((r) => setTimeout(r, 100));
      }
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(text).not.toContain('evil');
      expect(text).toMatch(/bgcut_inference_calls_total\{model="_unknown",provider="none",status="NOT_FOUND"\} 2/);
    } finally {
      await server.stop();
    }
  });
});
