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
import { Metadata, status as grpcStatus } from '@grpc/grpc-js';
import { parentPort, threadId, workerData } from 'node:worker_threads';
import {
  DATATYPE_BYTES,
  elementCount,
  EncodedInferRequest,
  modelInferMessages,
  TENSOR_ALIGNMENT,
  type ModelInferRequest,
  type ModelInferResponse__Output,
} from '../../protocol/index.js';
import { createServiceClient, isQueueFull } from './grpc-channel.js';
import { COLLECT_AFTER_BYTES, type FromThread, type InferTask, type ThreadOptions, type ToThread } from './inference-thread.js';
import { loopbackServers, SharedMemoryRing, type SlotUse } from './shared-memory-ring.js';
import { MODEL_METADATA_KEY } from './least-request-balancer.js';
import { readOutput } from './read-output.js';
import { gcFunction } from '../image/render-garbage.js';
import { kernelCalls } from '../image/kernel-calls.js';
import { WarmSpares } from '../image/warm-memory.js';
import { releaseNow } from '../../util/release-now.js';

/** Tries of a call that servers answer "queue full", each balanced onto the next server, before every server counts as full. */
const QUEUE_FULL_ATTEMPTS = 4;

const port = parentPort!;
const options = workerData as ThreadOptions;
const client = createServiceClient(options);
/**
 * Tensors through /dev/shm when the servers are on this host and accept it (shared-memory-ring.ts):
 * with several, each slot is registered with each server, through a client of its own.
 */
const servers = options.sharedMemory.mode === 'auto' ? (loopbackServers(options.address) ?? []) : [];
const controlClients = servers.length > 1 ? servers.map((address) => createServiceClient({ address, maxMessageBytes: 1024 * 1024, tls: options.tls })) : [client];
const ring = new SharedMemoryRing(controlClients, options.sharedMemory);
/**
 * The next mask's shared memory, made ready between calls (warm-memory.ts). 16 MiB: a 2048x2048
 * FP32 mask; a larger one takes fresh memory.
 */
const maskMemory = new WarmSpares(16 * 1024 * 1024);
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
    // The next mask of this size finds its memory mapped (off this call's path: it was answered).
    if (message.type === 'infer' && message.ok) maskMemory.refill();
    const bytes = task.message?.byteLength ?? task.tensor?.byteLength ?? 0;
    // A message moved here (its memory this thread's alone) goes now: grpc-js framed a copy of it
    // when the call started, and nothing reads it after the call ended.
    const freed = task.moved === true && releaseNow(task.message, TENSOR_ALIGNMENT);
    if (freed) released++;
    // A call through a slot whose message was freed left nothing large dead here (grpc-js framed a
    // few hundred bytes): no collection is owed for it. Otherwise the framed copy, or the message
    // itself, waits for one.
    collectAfterCall(freed && !overWire ? 0 : bytes);
  };
  // The client's ModelInfer serializer takes either (inferenceClientConstructor).
  const wire = task.message
    ? new EncodedInferRequest(asBuffer(task.message))
    : { ...task.header!, rawInputContents: [asBuffer(task.tensor!)] };
  // Or the tensors through a shared memory slot, when the ring has one free (else over the wire).
  const use = takeSlot(task);
  let request: ModelInferRequest | EncodedInferRequest = use ? slotRequest(task, use) : wire;
  let slot = use;
  /** The tensor went in the message (framed by grpc-js), not through a slot. */
  let overWire = !use;
  /** Settles the call's slot: free again after an answer, retired after anything else. */
  const settleSlot = (answered: boolean) => {
    if (!slot) return;
    if (answered) ring.release(slot);
    else ring.retire(slot);
    slot = undefined;
  };
  const deadline = Date.now() + task.timeoutMs;
  const metadata = new Metadata();
  metadata.set(MODEL_METADATA_KEY, task.model);
  for (const [name, value] of Object.entries(task.trace)) metadata.set(name, value);
  const attempt = (left: number): void => {
    state.call = client.ModelInfer(request as ModelInferRequest, metadata.clone(), { deadline }, (error, response) => {
      if (error && slot && REGION_REFUSALS.has(error.code) && !state.cancelled) {
        // The server refused the regions (it restarted, or turned the extension off): this call
        // goes over the wire, and the ring probes again later.
        ring.refused(slot);
        slot = undefined;
        request = wire;
        overWire = true;
        attempt(left);
        return;
      }
      if (error) {
        // A queue-full refusal comes before the server read the slot: it stays this call's for the next try.
        if (!(isQueueFull(error) && left > 1 && !state.cancelled && Date.now() < deadline)) settleSlot(false);
        // That server's queue is full: the balancer puts the next try on another server
        // (one that just refused loses to any other for a second: least-request-balancer.ts).
        if (isQueueFull(error) && left > 1 && !state.cancelled && Date.now() < deadline) attempt(left - 1);
        else finish({ type: 'infer', id: task.id, ok: false, status: { code: error.code, details: error.details, message: error.message } });
        return;
      }
      if (slot) {
        let answer: { shape: number[]; mask: SharedArrayBuffer; serverRunMs: number | undefined; bytesReceived: number };
        try {
          answer = readSlotOutput(response!, task, slot);
        } catch (failure) {
          settleSlot(false);
          finish({ type: 'infer', id: task.id, ok: false, unexpectedOutput: failure instanceof Error ? failure.message : String(failure) });
          return;
        }
        settleSlot(true);
        ring.counts.calls++;
        finish({ type: 'infer', id: task.id, ok: true, ...answer });
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
      const mask = maskMemory.take('shared', data.byteLength);
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
      reply({ type: 'counts', id: message.id, threadId, counts: { ...modelInferMessages }, collections, released, masksReady: kernelCalls.warmSpareTaken ?? 0, sharedMemory: ring.snapshot() });
      break;
    case 'close':
      // The slots are unregistered and their files removed before the channel closes.
      void ring.close().finally(() => {
        for (const control of controlClients) if (control !== client) control.close();
        client.close();
        port.close();
      });
      break;
  }
});

/** Statuses with which a server refuses a call's regions: retried over the wire. */
const REGION_REFUSALS = new Set<number>([grpcStatus.INVALID_ARGUMENT, grpcStatus.FAILED_PRECONDITION, grpcStatus.NOT_FOUND, grpcStatus.UNIMPLEMENTED, grpcStatus.PERMISSION_DENIED]);

/** The input's bytes (the tail of a message laid out by the pixel worker, or the tensor itself). */
function inputTensor(task: InferTask): Uint8Array {
  if (task.tensor) return task.tensor;
  const input = task.header!.inputs![0]!;
  const bytes = elementCount((input.shape ?? []).map(Number)) * DATATYPE_BYTES[input.datatype as keyof typeof DATATYPE_BYTES];
  return task.message!.subarray(task.message!.byteLength - bytes);
}

/** A slot for the call, with the input written into it; undefined: over the wire. */
function takeSlot(task: InferTask): SlotUse | undefined {
  const input = task.header?.inputs?.[0];
  if (!input || task.header!.inputs!.length !== 1) return undefined;
  const tensor = inputTensor(task);
  // A mask has at most as many elements as the image (one channel of it), of the output's type.
  const outputRoom = (tensor.byteLength / DATATYPE_BYTES[input.datatype as keyof typeof DATATYPE_BYTES]) * DATATYPE_BYTES[task.output.datatype];
  const use = ring.take(tensor.byteLength, outputRoom);
  if (!use) return undefined;
  try {
    ring.writeInput(use, tensor);
  } catch {
    ring.retire(use);
    return undefined;
  }
  return use;
}

const shmParameters = (region: string, byteSize: number, offset: number) => ({
  shared_memory_region: { stringParam: region },
  shared_memory_byte_size: { int64Param: byteSize },
  shared_memory_offset: { int64Param: offset },
});

/** The call's request with its input and output in the slot: a few dozen bytes for protobufjs. */
function slotRequest(task: InferTask, use: SlotUse): ModelInferRequest {
  const header = task.header!;
  return {
    ...header,
    inputs: header.inputs!.map((input) => ({ ...input, parameters: { ...input.parameters, ...shmParameters(use.slot.name, use.inputBytes, 0) } })),
    outputs: [{ name: task.output.name, parameters: shmParameters(use.slot.name, use.outputRoom, use.outputOffset) }],
  };
}

/** The mask the server wrote into the slot, checked against the answer's shape and read into shared memory. */
function readSlotOutput(response: ModelInferResponse__Output, task: InferTask, use: SlotUse) {
  const tensor = response.outputs.find((o) => o.name === task.output.name);
  if (!tensor) throw new Error(`no output ${task.output.name} in the answer`);
  if (tensor.datatype !== task.output.datatype) throw new Error(`output ${tensor.name} is ${tensor.datatype}, expected ${task.output.datatype}`);
  const shape = tensor.shape.map(Number);
  const bytes = elementCount(shape) * DATATYPE_BYTES[task.output.datatype];
  const written = tensor.parameters?.shared_memory_byte_size?.int64Param;
  if (bytes > use.outputRoom || (written !== undefined && Number(written) !== bytes)) {
    throw new Error(`output ${tensor.name} of shape [${shape}] (${bytes} bytes) does not match what the server wrote into shared memory (${String(written)} of ${use.outputRoom} bytes)`);
  }
  const mask = maskMemory.take('shared', bytes);
  ring.readOutput(use, new Uint8Array(mask));
  const runUs = response.parameters.session_run_us?.int64Param;
  return { shape, mask, serverRunMs: runUs === undefined ? undefined : Number(runUs) / 1000, bytesReceived: 0 };
}
