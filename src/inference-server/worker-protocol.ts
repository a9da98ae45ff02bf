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
}

export type WorkerReply =
  | { type: 'ready'; inputs: TensorSpec[]; outputs: TensorSpec[]; provider: string; skipped: { provider: string; error: string }[] }
  | { type: 'result'; id: number; outputs: TensorData[]; runMs: number; /** Outputs in one layOutOutputs buffer. */ laidOut?: boolean }
  | { type: 'error'; id: number; message: string }
  | { type: 'fatal'; message: string };
