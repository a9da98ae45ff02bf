/**
 * ModelInfer requests whose tensor is written into the message once (src/protocol/infer-request-message.ts):
 * their bytes, decoded by protobufjs from the committed proto file, are the request protobufjs
 * itself encodes; the bytes sent are the tensor's own memory; the real inference server answers
 * them as it answers protobufjs's encoding.
 */
import path from 'node:path';
import protobuf from 'protobufjs';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { isFramed, modelInput, prepareModelInput } from '../src/core/image/model-input.js';
import { probeImage } from '../src/core/image/pipeline.js';
import { PixelPool } from '../src/core/image/pixel-pool.js';
import { inputShape, ISNET_FP32_PROFILE, ISNET_PROFILE, type PreprocessingProfile } from '../src/core/image/profile.js';
import { imageToTensor, tensorBytes } from '../src/core/image/tensor.js';
import { InferenceClient } from '../src/core/inference/inference-client.js';
import {
  allocateInferMessage,
  EncodedInferRequest,
  inferenceClientConstructor,
  inferRequestPrefix,
  modelInferRequestEncoder,
  type InferRequestHeader,
} from '../src/protocol/index.js';
import { objectOnTexture } from './helpers/synthetic-image.js';

const ModelInferRequest = protobuf.loadSync(path.join(import.meta.dirname, '../proto/grpc_predict_v2.proto')).lookupType('inference.ModelInferRequest');

/** A small model size keeps the test quick; the layout does not depend on it. */
const SIZE = { width: 40, height: 24 };

/** Model-size RGB with every byte different from its neighbours. */
function pixels(profile: { width: number; height: number }): Buffer {
  const rgb = Buffer.alloc(profile.width * profile.height * 3);
  for (let i = 0; i < rgb.length; i++) rgb[i] = (i * 37 + 11) & 0xff;
  return rgb;
}

function header(profile: PreprocessingProfile, parameters: boolean): InferRequestHeader {
  return {
    modelName: 'isnet',
    ...(parameters ? { id: 'request-7', parameters: { priority: { int64Param: 3 }, note: { stringParam: 'é' } } } : {}),
    inputs: [{ name: profile.inputName, datatype: profile.inputDatatype ?? 'FP32', shape: inputShape(profile) }],
    outputs: [{ name: profile.outputName }],
  };
}

describe('a ModelInfer message with its tensor written in place', () => {
  const cases = [
    { datatype: 'FP32', profile: { ...ISNET_FP32_PROFILE, ...SIZE } },
    { datatype: 'UINT8', profile: { ...ISNET_PROFILE, ...SIZE } },
  ];
  for (const { datatype, profile } of cases) {
    for (const parameters of [false, true]) {
      it(`decodes to protobufjs's own encoding of the same request (${datatype}, ${parameters ? 'with' : 'without'} parameters)`, () => {
        const rgb = pixels(profile);
        const fields = header(profile, parameters);
        const { message, tensor } = allocateInferMessage(inferRequestPrefix(modelInferRequestEncoder(), fields, tensorBytes(profile)), tensorBytes(profile));
        imageToTensor(rgb, profile, tensor);

        // Expected: protobufjs, from the committed proto file, encoding the request with the tensor as its own bytes.
        const ownTensor = imageToTensor(rgb, profile);
        const request = { ...fields, rawInputContents: [Buffer.from(ownTensor.buffer, ownTensor.byteOffset, ownTensor.byteLength)] };
        const expected = Buffer.from(ModelInferRequest.encode(ModelInferRequest.fromObject(request)).finish());
        const decoded = ModelInferRequest.toObject(ModelInferRequest.decode(message), { longs: Number, defaults: true });
        expect(decoded).toEqual(ModelInferRequest.toObject(ModelInferRequest.decode(expected), { longs: Number, defaults: true }));
        expect(decoded.rawInputContents[0].length).toBe(tensorBytes(profile));
        expect(decoded.inputs[0].shape).toEqual(inputShape(profile));
        if (parameters) expect(decoded.parameters.priority.int64Param).toBe(3);
        // protobufjs writes fields in number order, as the prefix does: the very same bytes.
        expect(message.equals(expected)).toBe(true);
      });
    }
  }

  it('a varint length of several bytes (a 1024x1024 FP32 tensor, 12 MiB) decodes to the whole tensor', () => {
    const profile = { ...ISNET_FP32_PROFILE, width: 1024, height: 1024 };
    const fields = header(profile, false);
    const { message, tensor } = allocateInferMessage(inferRequestPrefix(modelInferRequestEncoder(), fields, tensorBytes(profile)), tensorBytes(profile));
    tensor[tensor.length - 1] = 0x7f;
    const decoded = ModelInferRequest.decode(message) as unknown as { rawInputContents: Uint8Array[] };
    expect(decoded.rawInputContents[0]!.length).toBe(12 * 1024 * 1024);
    expect(decoded.rawInputContents[0]![12 * 1024 * 1024 - 1]).toBe(0x7f);
  });

  it('the serializer sends the message buffer itself: the bytes handed to grpc-js are the tensor’s memory, not a copy', () => {
    const profile = { ...ISNET_FP32_PROFILE, ...SIZE };
    const prefix = inferRequestPrefix(modelInferRequestEncoder(), header(profile, false), tensorBytes(profile));
    const input = modelInput(pixels(profile), profile, prefix);
    if (!isFramed(input)) throw new Error('expected a framed input');
    // The FP32 view is aligned inside the message (a Float32Array cannot start anywhere else).
    expect(input.tensor).toBeInstanceOf(Float32Array);
    expect(input.tensor.byteOffset % 4).toBe(0);
    const serialize = inferenceClientConstructor().service.ModelInfer!.requestSerialize;
    const sent = serialize(new EncodedInferRequest(input.message));
    expect(sent).toBe(input.message);
    expect(sent.buffer).toBe(input.tensor.buffer);
    expect(input.tensor.byteOffset).toBe(sent.byteOffset + prefix.length);
    // Writing the tensor changes the bytes that would be sent.
    (input.tensor as Float32Array)[0] = 123.5;
    expect(Buffer.from(sent.subarray(prefix.length, prefix.length + 4)).readFloatLE(0)).toBe(123.5);
  });

  it('other requests still go through protobufjs (a request object encodes as before)', () => {
    const serialize = inferenceClientConstructor().service.ModelInfer!.requestSerialize;
    const request = { modelName: 'isnet', inputs: [{ name: 'x', datatype: 'UINT8', shape: [1, 2] }], rawInputContents: [Buffer.from([1, 2])] };
    expect(serialize(request).equals(Buffer.from(ModelInferRequest.encode(ModelInferRequest.fromObject(request)).finish()))).toBe(true);
  });
});

describe('a message with its tensor in place, through the real inference server', () => {
  let client: InferenceClient;
  beforeAll(() => {
    client = new InferenceClient({ address: inject('inferenceAddress'), timeoutMs: 60_000, maxMessageBytes: 64 << 20, retryAfterSeconds: 1 });
  });
  afterAll(() => client.close());

  it('answers the same mask as the same tensor encoded by protobufjs', async () => {
    const model = client.maskModel('isnet', ISNET_PROFILE);
    const size = { width: 320, height: 320 };
    const profile = { ...ISNET_PROFILE, ...size };
    const rgb = pixels(profile);
    const framed = modelInput(rgb, profile, model.prefix!(size));
    expect(isFramed(framed)).toBe(true);
    const signal = new AbortController().signal;
    const [inPlace, encoded] = await Promise.all([model(framed, signal, size), model(imageToTensor(rgb, profile), signal, size)]);
    expect(inPlace.mask.length).toBe(320 * 320);
    expect(Buffer.from(inPlace.mask.buffer, inPlace.mask.byteOffset, inPlace.mask.byteLength).equals(Buffer.from(encoded.mask.buffer, encoded.mask.byteOffset, encoded.mask.byteLength))).toBe(true);
  });

  it('refuses a message laid out for another call (another size) before sending it', async () => {
    const model = client.maskModel('isnet', ISNET_PROFILE);
    const profile = { ...ISNET_PROFILE, width: 320, height: 320 };
    const framed = modelInput(pixels(profile), profile, model.prefix!({ width: 320, height: 320 }));
    await expect(model(framed, new AbortController().signal, { width: 288, height: 288 })).rejects.toThrow(/laid out for another model call/);
  });
});

describe("the model's input prepared in the pixel pool's worker", () => {
  it('comes back as a message with the tensor in place, moved (not copied) and the same bytes as made on this thread', async () => {
    const pool = new PixelPool({ threads: 1 });
    try {
      const { bytes } = await objectOnTexture(300, 200);
      const limits = { maxInputPixels: 50_000_000 };
      const probe = await probeImage(bytes, limits);
      const profile = { ...ISNET_PROFILE, width: 64, height: 64 };
      const prefix = inferRequestPrefix(modelInferRequestEncoder(), header(profile, false), tensorBytes(profile));
      const job = { bytes, probe, limits, profile, prefix, decodeOnce: true };
      const [there, here] = await Promise.all([pool.modelInput(job), prepareModelInput(job)]);
      if (!isFramed(there.input) || !isFramed(here.input)) throw new Error('expected framed inputs');
      expect([...pool.ranIn].every((id) => id !== 0)).toBe(true);
      expect(there.input.message.equals(here.input.message)).toBe(true);
      // One memory for the message and its tensor, holding nothing else: it was moved whole.
      expect(there.input.tensor.buffer).toBe(there.input.message.buffer);
      expect(there.input.message.buffer.byteLength - there.input.message.byteLength).toBeLessThan(8);
      expect(there.rgb.equals(here.rgb)).toBe(true);
      expect(there.decoded?.length).toBe(300 * 200 * 3);
    } finally {
      await pool.close();
    }
  });
});
