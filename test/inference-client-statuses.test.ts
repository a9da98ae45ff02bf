import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError } from '../src/core/errors.js';
import { InferenceClient } from '../src/core/inference/inference-client.js';
import { loadInferenceProto, type GRPCInferenceServiceHandlers } from '../src/protocol/index.js';

/**
 * A gRPC server speaking the inference protocol whose ModelInfer answers what the test scripts,
 * counting the calls that reach it: the subject here is the client's reading of statuses, not
 * the model (the real server's own statuses are tested in inference-server.test.ts).
 */
async function scriptedServer(options: grpc.ServerOptions = {}) {
  let answer: (call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => void = (_call, callback) =>
    callback({ code: grpc.status.INTERNAL, details: 'not scripted' });
  const state = { calls: 0 };
  const server = new grpc.Server(options);
  const handlers = {
    ModelInfer(call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) {
      state.calls++;
      answer(call, callback);
    },
  } as unknown as GRPCInferenceServiceHandlers;
  server.addService(loadInferenceProto().inference.GRPCInferenceService.service, handlers);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))),
  );
  return {
    address: `127.0.0.1:${port}`,
    state,
    script: (next: typeof answer) => (answer = next),
    stop: () => server.forceShutdown(),
  };
}

const input = (bytes = 16) => ({ name: 'input', datatype: 'UINT8' as const, shape: [1, bytes], data: new Uint8Array(bytes) });
const output = { name: 'output', datatype: 'UINT8' as const };
const live = () => new AbortController().signal;

/** The ApiError an infer() call rejects with. */
async function failureOf(client: InferenceClient, signal = live(), bytes = 16): Promise<ApiError> {
  const error = await client.infer('m', input(bytes), output, signal).then(
    () => new Error('resolved'),
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ApiError);
  return error as ApiError;
}

describe('inference client: what its calls answer, and when it sends none', () => {
  let server: Awaited<ReturnType<typeof scriptedServer>>;
  let client: InferenceClient;
  beforeAll(async () => {
    server = await scriptedServer({ 'grpc.max_receive_message_length': 4096 });
    client = new InferenceClient({ address: server.address, timeoutMs: 10_000, maxMessageBytes: 1024 * 1024, retryAfterSeconds: 2 });
  });
  afterAll(() => {
    client.close();
    server.stop();
  });

  it('a call for a request that already ended sends nothing and rejects with the request\'s own reason', async () => {
    server.script((_call, callback) => callback({ code: grpc.status.INTERNAL, details: 'must not be reached' }));
    // Reach the server once, so the channel is connected and a call would go out at once.
    await failureOf(client);
    const before = server.state.calls;
    const controller = new AbortController();
    const reason = new ApiError('client_closed');
    controller.abort(reason);
    expect(await failureOf(client, controller.signal)).toBe(reason);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(server.state.calls).toBe(before);
  });

  it('a CANCELLED from the server is 503 inference_unavailable with Retry-After, not 408 upload_timeout', async () => {
    server.script((_call, callback) => callback({ code: grpc.status.CANCELLED, details: 'the session pool is closing' }));
    const error = await failureOf(client);
    expect([error.status, error.code, error.headers['retry-after']]).toEqual([503, 'inference_unavailable', '2']);
  });

  it('a RESOURCE_EXHAUSTED for a message over the size limit is a 500, tried once, with no "every server full" mark', async () => {
    // Over the server's 4 KiB receive limit: grpc-js refuses it with RESOURCE_EXHAUSTED before the handler runs.
    server.script((_call, callback) => callback({ code: grpc.status.INTERNAL, details: 'must not be reached' }));
    const oversized = await failureOf(client, live(), 8192);
    expect([oversized.status, oversized.code]).toEqual([500, 'internal_error']);
    expect((oversized.cause as grpc.ServiceError).code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(client.saturated()).toBe(false);
    // The same status and text from a handler: counted, so the tries can be.
    const before = server.state.calls;
    server.script((_call, callback) => callback({ code: grpc.status.RESOURCE_EXHAUSTED, details: 'Received message larger than max (8192 vs. 4096)' }));
    const answered = await failureOf(client);
    expect([answered.status, answered.code]).toEqual([500, 'internal_error']);
    expect(server.state.calls - before).toBe(1);
    expect(client.saturated()).toBe(false);
  });

  it('a RESOURCE_EXHAUSTED for a full queue is tried again, then 503 with the saturation mark', async () => {
    const before = server.state.calls;
    server.script((_call, callback) => callback({ code: grpc.status.RESOURCE_EXHAUSTED, details: 'all 1 workers busy and 0 jobs queued' }));
    const error = await failureOf(client);
    expect([error.status, error.code]).toEqual([503, 'inference_unavailable']);
    expect(server.state.calls - before).toBe(4);
    expect(client.saturated()).toBe(true);
  });
});
