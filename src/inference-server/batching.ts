import { tensorBytes, type TensorData } from './worker-protocol.js';

/**
 * Dynamic batching (opt-in, `--max-batch N`): calls that wait in a model's queue while its worker
 * is busy are run together, as one `session.run` over their images stacked on the batch axis.
 * A GPU runs a batch in less time per image (H100, ISNet at 1024x1024: 8.4 ms for one image,
 * 19.3 ms for 4, 33.9 ms for 8), but measured through this server the gain did not arrive: its
 * main thread spends ~16 ms per 3 MiB call on gRPC and copies, which caps one server near 60
 * images/s with or without batching (53.8 images/s batched by 4 vs 62.9 unbatched, 8 callers;
 * npm run bench:gpu). So it is off by default everywhere; it pays where calls are cheaper than
 * the model (smaller inputs, a bigger model) — measure with bench:gpu before turning it on.
 *
 * No timer: a batch is whatever queued while the previous one ran, so a lone call never waits
 * for company, and under load batches fill by themselves.
 */

/**
 * Calls can share a batch when they feed the same inputs, with the same datatypes and the same
 * shape past the batch axis, and ask for the same outputs. Anything else (a different image size,
 * on a model whose size is free) runs in a batch of its own kind.
 */
export function batchKey(inputs: readonly TensorData[], outputNames: readonly string[]): string | undefined {
  const parts: string[] = [];
  for (const input of inputs) {
    if (input.shape.length === 0 || !(input.shape[0]! >= 1)) return undefined;
    parts.push(`${input.name}:${input.datatype}:${input.shape.slice(1).join('x')}`);
  }
  return `${parts.join('|')}>${outputNames.join(',')}`;
}

/** The images of several calls stacked on the batch axis (row-major: one copy of each call's bytes). */
export function stackInputs(calls: readonly (readonly TensorData[])[]): TensorData[] {
  const first = calls[0]!;
  return first.map((input, index) => {
    const parts = calls.map((call) => call[index]!);
    const total = parts.reduce((sum, part) => sum + tensorBytes(part).byteLength, 0);
    const bytes = new Uint8Array(total);
    let offset = 0;
    for (const part of parts) {
      const partBytes = tensorBytes(part);
      bytes.set(partBytes, offset);
      offset += partBytes.byteLength;
    }
    const batch = parts.reduce((sum, part) => sum + part.shape[0]!, 0);
    return { name: input.name, datatype: input.datatype, shape: [batch, ...input.shape.slice(1)], data: bytes.buffer };
  });
}

/**
 * A batch's outputs given back to the calls it stacked, each its own rows of every output.
 * `sizes` are the calls' batch sizes in stacking order. An output whose batch axis does not match
 * is an error, never a silent mix-up of images.
 */
export function splitOutputs(outputs: readonly TensorData[], sizes: readonly number[]): TensorData[][] {
  const total = sizes.reduce((sum, size) => sum + size, 0);
  const perCall: TensorData[][] = sizes.map(() => []);
  for (const output of outputs) {
    if (output.shape[0] !== total) {
      throw new Error(`output ${output.name} has batch ${output.shape[0]}, the batch stacked ${total} images`);
    }
    const outputBytes = tensorBytes(output);
    const rowBytes = outputBytes.byteLength / total;
    let row = 0;
    sizes.forEach((size, call) => {
      const data = outputBytes.slice(row * rowBytes, (row + size) * rowBytes).buffer;
      perCall[call]!.push({ name: output.name, datatype: output.datatype, shape: [size, ...output.shape.slice(1)], data });
      row += size;
    });
  }
  return perCall;
}

/**
 * The batch a session.run is given when batching: always maxBatch, the rest padded with blank
 * images. Measured on an H100 with ONNX Runtime 1.29's CUDA provider (npm run bench:gpu): a
 * session whose input shape changes from one run to the next pays its first-run price again,
 * 1.8-2.4 s, at every change (batch 1, 4, 1, 4 each took ~2 s; 4 after 4 took 34 ms). A session
 * that always sees one shape never pays it after warm-up; padding costs a lone call 11 ms
 * (18.7 ms for a batch of 4 against 7.3 ms for one image, at 1024x1024).
 */
export function paddedBatchSize(images: number, maxBatch: number): number {
  return Math.max(images, maxBatch);
}

/** The batch sizes a session may be run with, for warming them all up before serving. */
export function batchSizes(maxBatch: number): number[] {
  return [maxBatch];
}

/** `inputs` with `rows` blank images added on the batch axis. */
export function padInputs(inputs: readonly TensorData[], rows: number): TensorData[] {
  if (rows === 0) return [...inputs];
  return inputs.map((input) => {
    const inputBytes = tensorBytes(input);
    const rowBytes = inputBytes.byteLength / input.shape[0]!;
    const bytes = new Uint8Array(inputBytes.byteLength + rows * rowBytes);
    bytes.set(inputBytes);
    return { name: input.name, datatype: input.datatype, shape: [input.shape[0]! + rows, ...input.shape.slice(1)], data: bytes.buffer };
  });
}

