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
}

export interface RunJob {
  type: 'run';
  id: number;
  inputs: TensorData[];
  outputNames: string[];
}

export type WorkerReply =
  | { type: 'ready'; inputs: TensorSpec[]; outputs: TensorSpec[]; provider: string; skipped: { provider: string; error: string }[] }
  | { type: 'result'; id: number; outputs: TensorData[]; runMs: number }
  | { type: 'error'; id: number; message: string }
  | { type: 'fatal'; message: string };
