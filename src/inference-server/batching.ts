import type { TensorData } from './worker-protocol.js';

/**
 * Dynamic batching for accelerators: calls that wait in a model's queue while its worker is busy
 * are run together, as one `session.run` over their images stacked on the batch axis. A GPU runs
 * a batch of 8 in little more time than one image, so under load this multiplies throughput; on
 * a CPU the work grows with the batch and nothing is gained, so the pool batches only when told.
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
    const total = parts.reduce((sum, part) => sum + part.data.byteLength, 0);
    const bytes = new Uint8Array(total);
    let offset = 0;
    for (const part of parts) {
      bytes.set(new Uint8Array(part.data), offset);
      offset += part.data.byteLength;
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
    const rowBytes = output.data.byteLength / total;
    let row = 0;
    sizes.forEach((size, call) => {
      const data = output.data.slice(row * rowBytes, (row + size) * rowBytes);
      perCall[call]!.push({ name: output.name, datatype: output.datatype, shape: [size, ...output.shape.slice(1)], data });
      row += size;
    });
  }
  return perCall;
}

/** Providers on which batching pays: accelerators. CPU execution gains nothing from it. */
export function batchesByDefault(provider: string): boolean {
  return provider !== 'cpu';
}
