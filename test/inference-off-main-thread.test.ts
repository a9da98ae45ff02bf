import * as grpc from '@grpc/grpc-js';
import { isMainThread, threadId, type Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ISNET_PROFILE, type RemoveBgHandler } from '../src/core/index.js';
import { isFramed, modelInput } from '../src/core/image/model-input.js';
import { probeImage } from '../src/core/image/pipeline.js';
import { PixelPool } from '../src/core/image/pixel-pool.js';
import { isShared } from '../src/core/image/shared-bytes.js';
import { ApiError } from '../src/core/errors.js';
import { InferenceClient } from '../src/core/inference/inference-client.js';
import { COLLECT_AFTER_BYTES } from '../src/core/inference/inference-thread.js';
import { loadInferenceProto, modelInferMessages, type GRPCInferenceServiceHandlers } from '../src/protocol/index.js';
import { uploadRequest } from './helpers/core-request.js';
import { oneKeyHandler } from './helpers/one-key-handler.js';
import { objectOnTexture } from './helpers/synthetic-image.js';

/**
 * Every ModelInfer call is made on the inference thread (src/core/inference/inference-thread.ts),
 * never on the event loop of the process that mounts the handler: the request message (the
 * tensor, 3 MiB or more) is encoded, framed and written there, and the answer (the mask) decoded
 * there. Asserted on where it happens, not on time: protocol/message-counts.ts counts each
 * ModelInfer message encoded and decoded in the thread that does it; after real cutouts the main
 * thread's counts have not moved, and the thread's have.
 */
const mainCounts = () => ({ ...modelInferMessages });

/** A client of the suite's inference server, and calls of its isnet model on a grey side x side input. */
function isnetAtSide(side: number) {
  const client = new InferenceClient({ address: inject('inferenceAddress'), timeoutMs: 120_000, maxMessageBytes: 64 << 20, retryAfterSeconds: 1 });
  const model = client.maskModel('isnet', ISNET_PROFILE);
  const size = { width: side, height: side };
  const profile = { ...ISNET_PROFILE, ...size };
  const input = () => modelInput(Buffer.alloc(side * side * 3, 128), profile, model.prefix!(size));
  const call = () => model(input(), new AbortController().signal, size);
  return { client, input, call };
}

describe('ModelInfer calls stay off the main thread', () => {
  let handler: RemoveBgHandler;
  let key: string;
  beforeAll(async () => {
    ({ handler, key } = await oneKeyHandler('acct_open', inject('inferenceAddress')));
  });
  afterAll(() => handler?.close());

  it('through the handler (balanced, and best with its extra passes): no ModelInfer message encoded or decoded on the main thread', async () => {
    expect(isMainThread).toBe(true);
    const { bytes } = await objectOnTexture(480, 360);
    const before = mainCounts();
    for (const query of ['', '?quality=best']) {
      const { request } = uploadRequest(key, bytes, 'photo.jpg');
      request.url = `/v1/remove-bg${query}`;
      const response = await handler.handle(request);
      expect(response.status, `${query}: ${response.body.toString().slice(0, 200)}`).toBe(200);
    }
    expect(mainCounts()).toEqual(before);
  }, 600_000);

  it('the same client code makes its calls in the thread: the thread counts them, the message is ordinary memory moved from the pixel worker, the mask comes back in shared memory', async () => {
    const client = new InferenceClient({ address: inject('inferenceAddress'), timeoutMs: 120_000, maxMessageBytes: 64 << 20, retryAfterSeconds: 1 });
    const pool = new PixelPool({ threads: 1 });
    try {
      const model = client.maskModel('isnet', ISNET_PROFILE);
      const { bytes } = await objectOnTexture(300, 200);
      const limits = { maxInputPixels: 50_000_000 };
      const probe = await probeImage(bytes, limits);
      const size = { width: 320, height: 320 };
      const profile = { ...ISNET_PROFILE, ...size };
      const { input } = await pool.modelInput({ bytes, probe, limits, profile, prefix: model.prefix!(size), decodeOnce: false });
      if (!isFramed(input)) throw new Error('expected a framed input');
      // Made in the worker and moved here, not shared: shared memory is never counted toward a
      // collection by any thread that holds it (infer-request-message.ts).
      expect(isShared(input.message)).toBe(false);
      expect(input.message.buffer).toBeInstanceOf(ArrayBuffer);
      const before = mainCounts();
      const thread = await client.inferenceThreadCounts();
      const { mask } = await model(input, new AbortController().signal, size);
      expect(mask.length).toBe(320 * 320);
      expect(mask.buffer).toBeInstanceOf(SharedArrayBuffer);
      const after = await client.inferenceThreadCounts();
      expect(mainCounts()).toEqual(before);
      expect(after.threadId).not.toBe(threadId);
      expect([after.counts.encoded - thread.counts.encoded, after.counts.decoded - thread.counts.decoded]).toEqual([1, 1]);
    } finally {
      await pool.close();
      await client.close();
    }
    // close() ends the thread (RemoveBgHandler.close() calls it): none is left behind.
    expect(client.inferenceThreadId).toBeUndefined();
  }, 300_000);
});

describe('the model call\'s message leaves the main thread with the call', () => {
  it('a message the pixel pool made for the call is moved to the thread (it reads as empty here after) and freed there as the call ends; one the caller made is copied (still whole); both answer alike', async () => {
    const client = new InferenceClient({ address: inject('inferenceAddress'), timeoutMs: 120_000, maxMessageBytes: 64 << 20, retryAfterSeconds: 1 });
    const pool = new PixelPool({ threads: 1 });
    try {
      const model = client.maskModel('isnet', ISNET_PROFILE);
      const { bytes } = await objectOnTexture(300, 200);
      const limits = { maxInputPixels: 50_000_000 };
      const probe = await probeImage(bytes, limits);
      const size = { width: 256, height: 256 };
      const profile = { ...ISNET_PROFILE, ...size };
      const { input, rgb } = await pool.modelInput({ bytes, probe, limits, profile, prefix: model.prefix!(size), decodeOnce: false });
      if (!isFramed(input)) throw new Error('expected a framed input');
      const length = input.message.length;
      expect(input.sendOnce).toBe(true);
      // The caller's own message for the same image, laid out alike.
      const own = modelInput(Buffer.from(rgb), profile, model.prefix!(size));
      if (!isFramed(own)) throw new Error('expected a framed input');
      expect(own.message.equals(input.message)).toBe(true);
      const thread = (client as unknown as { thread: { moved: number } }).thread;
      const movedBefore = thread.moved;
      const releasedBefore = (await client.inferenceThreadCounts()).released;
      const moved = await model(input, new AbortController().signal, size);
      // Moved: its memory is gone from this thread at once, no collection needed...
      expect(input.message.length).toBe(0);
      expect(input.message.buffer.byteLength).toBe(0);
      expect(thread.moved).toBe(movedBefore + 1);
      // ...and the inference thread freed it as the call ended, not at its next collection.
      expect((await client.inferenceThreadCounts()).released).toBe(releasedBefore + 1);
      const copied = await model(own, new AbortController().signal, size);
      expect(own.message.length).toBe(length);
      expect(thread.moved).toBe(movedBefore + 1);
      // A copy is the thread's too, but not counted as moved: left to its collections as before.
      expect((await client.inferenceThreadCounts()).released).toBe(releasedBefore + 1);
      expect(Buffer.from(moved.mask.buffer, moved.mask.byteOffset, moved.mask.byteLength).equals(Buffer.from(copied.mask.buffer, copied.mask.byteOffset, copied.mask.byteLength))).toBe(true);
    } finally {
      await pool.close();
      await client.close();
    }
  }, 300_000);
});

describe('the inference thread stopping', () => {
  it('fails the calls waiting on it with 500 internal_error, and the next call starts a fresh thread', async () => {
    const { client, call } = isnetAtSide(64);
    try {
      const first = client.inferenceThreadId;
      const waiting = call();
      // A crash, as the thread would see one.
      await (client as unknown as { thread: { worker: Worker } }).thread.worker.terminate();
      const error = await waiting.then(() => undefined, (e: unknown) => e);
      expect(error).toBeInstanceOf(ApiError);
      expect([(error as ApiError).status, (error as ApiError).code]).toEqual([500, 'internal_error']);
      const { mask } = await call();
      expect(mask.length).toBe(64 * 64);
      expect(client.inferenceThreadId).toBeGreaterThan(first!);
    } finally {
      await client.close();
    }
  }, 120_000);
});

describe('the inference thread collects its own garbage', () => {
  it('collects exactly once after just over COLLECT_AFTER_BYTES (8 MiB) of messages sent since its last collection', async () => {
    const { client, input, call } = isnetAtSide(512);
    try {
      const messageBytes = (input() as { message: Uint8Array }).message.byteLength;
      const before = (await client.inferenceThreadCounts()).collections;
      // Enough calls to pass the threshold once, not twice.
      expect(COLLECT_AFTER_BYTES).toBe(8 << 20);
      const calls = Math.floor(COLLECT_AFTER_BYTES / messageBytes) + 1;
      for (let i = 0; i < calls; i++) await call();
      const after = (await client.inferenceThreadCounts()).collections;
      expect(after - before).toBe(1);
    } finally {
      await client.close();
    }
  }, 300_000);
});

describe('the inference thread cancels a call whose request ended', () => {
  let server: grpc.Server;
  let address: string;
  const arrived: string[] = [];
  const cancelled: string[] = [];
  beforeAll(async () => {
    server = new grpc.Server();
    // A server that never answers, and records the calls the client cancelled.
    const handlers = {
      ModelInfer(call: grpc.ServerUnaryCall<{ modelName: string }, unknown>) {
        arrived.push(call.request.modelName);
        call.on('cancelled', () => cancelled.push(call.request.modelName));
      },
    } as unknown as GRPCInferenceServiceHandlers;
    server.addService(loadInferenceProto().inference.GRPCInferenceService.service, handlers);
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))),
    );
    address = `127.0.0.1:${port}`;
  });
  afterAll(() => server.forceShutdown());

  it('an abort reaches the server as a cancellation, and the call rejects with the request\'s own reason', async () => {
    const client = new InferenceClient({ address, timeoutMs: 60_000, maxMessageBytes: 1 << 20, retryAfterSeconds: 1 });
    try {
      const controller = new AbortController();
      const input = { name: 'input', datatype: 'UINT8' as const, shape: [1, 16], data: new Uint8Array(16) };
      const call = client.infer('held', input, { name: 'output', datatype: 'UINT8' }, controller.signal);
      // Until the server has it open.
      for (let i = 0; i < 1500 && arrived.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(arrived).toEqual(['held']);
      const reason = new ApiError('client_closed');
      controller.abort(reason);
      await expect(call).rejects.toBe(reason);
      for (let i = 0; i < 250 && cancelled.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(cancelled).toEqual(['held']);
    } finally {
      await client.close();
    }
  }, 60_000);
});
