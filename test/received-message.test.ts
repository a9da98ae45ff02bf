/**
 * Input tensors moved to the session worker in grpc-js's own received buffer
 * (src/inference-server/received-message.ts): over a real grpc-js server and client on loopback,
 * with the committed proto, a large raw tensor comes back from movableTensor as that very buffer
 * (no copy), its bytes equal to what was sent and to protobufjs's decoding of the message; moving
 * it detaches the request's view; small messages (Node's shared pool) and misaligned tensors are
 * copied instead.
 */
import * as grpc from '@grpc/grpc-js';
import path from 'node:path';
import protobuf from 'protobufjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { markingDeserializer, movableTensor, ownsItsBuffer } from '../src/inference-server/received-message.js';
import { inferenceClientConstructor, loadInferenceProto, modelInferRequestEncoder, type ModelInferRequest__Output } from '../src/protocol/index.js';

const ModelInferRequest = protobuf.loadSync(path.join(import.meta.dirname, '../proto/grpc_predict_v2.proto')).lookupType('inference.ModelInferRequest');

interface Seen {
  request: ModelInferRequest__Output;
  moved: ReturnType<typeof movableTensor>;
  rawBuffer: ArrayBufferLike;
  detachedAfterTransfer: number;
  equalToProtobufjs: boolean;
}

describe('a ModelInfer tensor moved in the received buffer', () => {
  let server: grpc.Server;
  let client: InstanceType<ReturnType<typeof inferenceClientConstructor>>;
  const seen: Seen[] = [];
  let alignment = 1;

  beforeAll(async () => {
    server = new grpc.Server({ 'grpc.max_receive_message_length': 16 << 20 });
    const Service = loadInferenceProto().inference.GRPCInferenceService.service;
    let lastMessage: Buffer | undefined;
    const deserialize = markingDeserializer(Service.ModelInfer.requestDeserialize);
    const service = {
      ...Service,
      ModelInfer: {
        ...Service.ModelInfer,
        requestDeserialize: (message: Buffer) => {
          lastMessage = Buffer.from(message); // a copy, for protobufjs's own decoding below
          return deserialize(message);
        },
      },
    };
    server.addService(service, {
      ModelInfer(call: grpc.ServerUnaryCall<ModelInferRequest__Output, unknown>, callback: grpc.sendUnaryData<unknown>) {
        const request = call.request;
        const raw = request.rawInputContents[0]!;
        const expected = (ModelInferRequest.toObject(ModelInferRequest.decode(lastMessage!)) as { rawInputContents: Uint8Array[] }).rawInputContents[0]!;
        const equalToProtobufjs = Buffer.compare(Buffer.from(expected), raw) === 0;
        const rawBuffer = raw.buffer;
        const moved = movableTensor(raw, alignment);
        const copy = Buffer.from(new Uint8Array(moved.data, moved.byteOffset, moved.byteLength));
        structuredClone(moved.data, { transfer: [moved.data] }); // what postMessage to the worker does
        seen.push({ request, moved: { ...moved, data: copy.buffer as ArrayBuffer, byteOffset: copy.byteOffset }, rawBuffer, detachedAfterTransfer: raw.byteLength, equalToProtobufjs });
        callback(null, { modelName: request.modelName, outputs: [], rawOutputContents: [] });
      },
      ModelMetadata: () => undefined,
      ModelReady: () => undefined,
      ServerLive: () => undefined,
      ServerReady: () => undefined,
      ServerMetadata: () => undefined,
    } as never);
    const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
    const Client = inferenceClientConstructor();
    client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), { 'grpc.max_send_message_length': 16 << 20 });
  });

  afterAll(() => {
    client?.close();
    server?.forceShutdown();
  });

  const send = (tensor: Buffer, modelName = 'm') =>
    new Promise<Seen>((resolve, reject) => {
      seen.length = 0;
      client.ModelInfer({ modelName, inputs: [{ name: 'x', datatype: 'UINT8', shape: [tensor.length] }], rawInputContents: [tensor] }, { deadline: Date.now() + 10_000 }, (error) =>
        error ? reject(error) : resolve(seen[0]!),
      );
    });

  function pattern(length: number): Buffer {
    const bytes = Buffer.alloc(length);
    for (let i = 0; i < length; i++) bytes[i] = (i * 37 + 11) & 0xff;
    return bytes;
  }

  it('moves a 1 MiB tensor in the buffer grpc-js received it in, bytes unchanged, and the move detaches the request', async () => {
    alignment = 1;
    const tensor = pattern(1 << 20);
    const got = await send(tensor);
    expect(got.equalToProtobufjs).toBe(true);
    expect(got.moved.byteLength).toBe(tensor.length);
    expect(Buffer.compare(Buffer.from(got.moved.data, got.moved.byteOffset, got.moved.byteLength), tensor)).toBe(0);
    // No copy: the request's own view was detached by transferring what movableTensor gave.
    expect(got.detachedAfterTransfer).toBe(0);
  });

  it('copies a tensor whose offset in the message the datatype does not divide (a typed array could not view it)', async () => {
    // modelName length shifts the tensor's offset; find one where the offset is odd.
    alignment = 8;
    let got: Seen | undefined;
    for (const name of ['m', 'mo', 'mod', 'mode', 'model', 'models', 'modelsx', 'modelsxy']) {
      got = await send(pattern(1 << 20), name);
      if (got.detachedAfterTransfer !== 0) break;
    }
    expect(got!.detachedAfterTransfer).toBe(1 << 20);
    expect(Buffer.compare(Buffer.from(got!.moved.data, got!.moved.byteOffset, got!.moved.byteLength), pattern(1 << 20))).toBe(0);
  });

  it('copies a small tensor (its message lies in Node\'s shared buffer pool) and leaves the request intact', async () => {
    alignment = 1;
    const tensor = pattern(100);
    const got = await send(tensor);
    expect(got.equalToProtobufjs).toBe(true);
    expect(got.detachedAfterTransfer).toBe(100);
    expect(Buffer.compare(Buffer.from(got.moved.data, got.moved.byteOffset, got.moved.byteLength), tensor)).toBe(0);
  });

  it('marks only buffers a message fills alone', () => {
    const whole = Buffer.alloc(64 << 10);
    expect(ownsItsBuffer(whole)).toBe(true);
    expect(ownsItsBuffer(whole.subarray(5))).toBe(true);
    expect(ownsItsBuffer(whole.subarray(6))).toBe(false);
    expect(ownsItsBuffer(whole.subarray(5, whole.length - 1))).toBe(false);
    expect(ownsItsBuffer(Buffer.from('small'))).toBe(false);
    expect(modelInferRequestEncoder()).toBeTypeOf('function');
  });
});
