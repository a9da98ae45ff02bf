/**
 * The inference thread (inference-thread.ts): a worker thread with a gRPC channel of its own on
 * which every ModelInfer call of the API is made. A call's message (the tensor written into it by
 * a pixel-pool worker, moved here by the main thread's post, or copied when the caller keeps it)
 * is framed and written here, freed as its call ends when it was moved, and the
 * answer read here; the mask goes back to the main thread in shared memory (the render's worker
 * reads it from there without a copy). The main thread posts a task and gets a reply: no gRPC
 * framing, HTTP/2 or protobuf decoding on the host's event loop.
 */
import type * as grpc from '@grpc/grpc-js';
import { Metadata } from '@grpc/grpc-js';
import { parentPort, threadId, workerData } from 'node:worker_threads';
import { EncodedInferRequest, modelInferMessages, TENSOR_ALIGNMENT, type ModelInferRequest } from '../../protocol/index.js';
import { createServiceClient, isQueueFull, type ChannelOptions } from './grpc-channel.js';
import { COLLECT_AFTER_BYTES, type FromThread, type InferTask, type ToThread } from './inference-thread.js';
import { MODEL_METADATA_KEY } from './least-request-balancer.js';
import { readOutput } from './read-output.js';
import { gcFunction } from '../image/render-garbage.js';
import { releaseNow } from '../../util/release-now.js';

/** Tries of a call that servers answer "queue full", each balanced onto the next server, before every server counts as full. */
const QUEUE_FULL_ATTEMPTS = 4;

const port = parentPort!;
const client = createServiceClient(workerData as ChannelOptions);
/** The calls under way, by task id: what a cancel needs. */
const open = new Map<number, { call?: grpc.ClientUnaryCall; cancelled: boolean }>();

const asBuffer = (bytes: Uint8Array): Buffer => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);

let bytesSinceCollection = 0;
let collections = 0;
/** Moved messages this thread released as their calls ended (for tests). */
let released = 0;
function collectAfterCall(bytes: number): void {
  bytesSinceCollection += bytes;
  if (bytesSinceCollection < COLLECT_AFTER_BYTES) return;
  bytesSinceCollection = 0;
  const gc = gcFunction();
  if (gc) {
    gc();
    collections++;
  }
}

function reply(message: FromThread): void {
  port.postMessage(message);
}

function infer(task: InferTask): void {
  const state: { call?: grpc.ClientUnaryCall; cancelled: boolean } = { cancelled: false };
  open.set(task.id, state);
  const finish = (message: FromThread) => {
    open.delete(task.id);
    reply(message);
    const bytes = task.message?.byteLength ?? task.tensor?.byteLength ?? 0;
    // A message moved here (its memory this thread's alone) goes now: grpc-js framed a copy of it
    // when the call started, and nothing reads it after the call ended.
    if (task.moved && releaseNow(task.message, TENSOR_ALIGNMENT)) released++;
    collectAfterCall(bytes);
  };
  // The client's ModelInfer serializer takes either (inferenceClientConstructor).
  const request = task.message
    ? new EncodedInferRequest(asBuffer(task.message))
    : { ...task.header!, rawInputContents: [asBuffer(task.tensor!)] };
  const deadline = Date.now() + task.timeoutMs;
  const metadata = new Metadata();
  metadata.set(MODEL_METADATA_KEY, task.model);
  for (const [name, value] of Object.entries(task.trace)) metadata.set(name, value);
  const attempt = (left: number): void => {
    state.call = client.ModelInfer(request as ModelInferRequest, metadata.clone(), { deadline }, (error, response) => {
      if (error) {
        // That server's queue is full: the balancer puts the next try on another server
        // (one that just refused loses to any other for a second: least-request-balancer.ts).
        if (isQueueFull(error) && left > 1 && !state.cancelled && Date.now() < deadline) attempt(left - 1);
        else finish({ type: 'infer', id: task.id, ok: false, status: { code: error.code, details: error.details, message: error.message } });
        return;
      }
      let output: ReturnType<typeof readOutput>;
      try {
        output = readOutput(response!, task.output.name, task.output.datatype);
      } catch (failure) {
        finish({ type: 'infer', id: task.id, ok: false, unexpectedOutput: failure instanceof Error ? failure.message : String(failure) });
        return;
      }
      // The mask into shared memory: the main thread gets a handle, not 1 MiB or more of external memory.
      const { data } = output;
      const mask = new SharedArrayBuffer(data.byteLength);
      new Uint8Array(mask).set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
      finish({ type: 'infer', id: task.id, ok: true, shape: output.shape, mask, serverRunMs: output.serverRunMs, bytesReceived: output.bytesReceived });
    });
  };
  attempt(QUEUE_FULL_ATTEMPTS);
}

port.on('message', (message: ToThread) => {
  switch (message.type) {
    case 'infer':
      infer(message);
      break;
    case 'cancel': {
      // The HTTP request ended: cancel, so a queued inference is dropped on the server.
      const state = open.get(message.id);
      if (state) {
        state.cancelled = true;
        state.call?.cancel();
      }
      break;
    }
    case 'counts':
      reply({ type: 'counts', id: message.id, threadId, counts: { ...modelInferMessages }, collections, released });
      break;
    case 'close':
      client.close();
      port.close();
      break;
  }
});
