import type { Datatype } from '../protocol/index.js';

/** Messages between the session pool (main thread) and a session worker thread. */

export interface TensorSpec {
  name: string;
  datatype: Datatype;
  /** -1 marks a dimension the model leaves free. */
  shape: number[];
}

export interface WorkerInit {
  modelFile: string;
  intraOpThreads: number;
  /** Execution providers to try in order (`cuda`, `tensorrt`, `coreml`, `dml`, `cpu`, ...). */
  providers: string[];
}

export interface TensorData {
  name: string;
  datatype: Datatype;
  shape: number[];
  /** Little-endian row-major bytes; transferred, not copied, between threads. */
  data: ArrayBuffer;
  /**
   * Where the tensor lies inside `data`, when `data` holds more (a received gRPC message moved to
   * the worker whole: received-message.ts); the whole of `data` when absent.
   */
  byteOffset?: number;
  byteLength?: number;
  /**
   * The tensor lies in a client's shared memory region instead (shared-memory-regions.ts): the
   * worker reads an input from there into a buffer of its own, writes an output there, and
   * `data` is empty.
   */
  place?: TensorPlace;
}

/** A stretch of a shared memory object's file (shared-memory-regions.ts). */
export interface TensorPlace {
  file: string;
  position: number;
  byteLength: number;
}

/** The tensor's bytes: a view of `data`, never a copy. */
export function tensorBytes(tensor: TensorData): Uint8Array {
  return new Uint8Array(tensor.data, tensor.byteOffset ?? 0, tensor.byteLength ?? tensor.data.byteLength - (tensor.byteOffset ?? 0));
}

export interface RunJob {
  type: 'run';
  id: number;
  inputs: TensorData[];
  outputNames: string[];
  /** Per output name, the region to write it into instead of the answer (or undefined). */
  outputPlaces?: (TensorPlace | undefined)[] | undefined;
}

export type WorkerReply =
  | { type: 'ready'; inputs: TensorSpec[]; outputs: TensorSpec[]; provider: string; skipped: { provider: string; error: string }[] }
  | { type: 'result'; id: number; outputs: TensorData[]; runMs: number; /** Outputs in one layOutOutputs buffer. */ laidOut?: boolean }
  | { type: 'error'; id: number; message: string; /** A shared memory region the call named was unusable: the caller's fault, not the model's. */ region?: 'FAILED_PRECONDITION' | 'INVALID_ARGUMENT' }
  | { type: 'fatal'; message: string };
