import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import onnxProto from 'onnx-proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// From dist: the pool starts its worker thread from the built session-worker.js.
import { SessionPool } from '../dist/src/inference-server/session-pool.js';
import { batchKey, batchSizes, padInputs, paddedBatchSize, splitOutputs, stackInputs } from '../src/inference-server/batching.js';
import { tensorBytes, type TensorData } from '../src/inference-server/worker-protocol.js';

const { onnx } = onnxProto;

/**
 * A tiny model with the prepared models' contract (UINT8 [N,H,W,3] in, batch and size free):
 * its output is each image's brightest value, [N,1,1,1], so every call can tell whether it got
 * its own row back from a batch.
 */
function peakModel(): Uint8Array {
  const dim = (d: number | string) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d });
  const model = onnx.ModelProto.create({
    irVersion: 8,
    opsetImport: [{ domain: '', version: 17 }],
    graph: {
      name: 'peak',
      node: [{ opType: 'ReduceMax', input: ['image'], output: ['mask'], attribute: [{ name: 'axes', ints: [1, 2, 3], type: onnx.AttributeProto.AttributeType.INTS }] }],
      input: [{ name: 'image', type: { tensorType: { elemType: 2, shape: { dim: [dim('batch'), dim('h'), dim('w'), dim(3)] } } } }],
      output: [{ name: 'mask', type: { tensorType: { elemType: 2, shape: { dim: [dim('batch'), dim(1), dim(1), dim(1)] } } } }],
    },
  });
  return onnx.ModelProto.encode(model).finish();
}

function image(value: number, size = 8): TensorData {
  const data = new Uint8Array(size * size * 3).fill(value);
  return { name: 'image', datatype: 'UINT8', shape: [1, size, size, 3], data: data.buffer };
}

describe('dynamic batching', () => {
  let dir: string;
  let modelFile: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-batching-'));
    modelFile = path.join(dir, 'peak.onnx');
    await writeFile(modelFile, peakModel());
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function runSix(maxBatch: number, sizes: number[] = [8, 8, 8, 8, 8, 8]) {
    const pool = new SessionPool({ modelFile, providers: ['cpu'], workers: 1, intraOpThreads: 1, maxQueue: 16, maxBatch });
    await pool.start();
    try {
      // All six are submitted before the worker can answer: one starts, five wait together.
      const results = await Promise.all(sizes.map((size, i) => pool.run([image(10 * (i + 1), size)], ['mask'])));
      return { results, stats: { ...pool.stats } };
    } finally {
      await pool.close();
    }
  }

  it('runs calls that queued together in one session.run, each call getting its own image back', async () => {
    const { results, stats } = await runSix(4);
    expect(results.map((r) => tensorBytes(r.outputs[0]!)[0])).toEqual([10, 20, 30, 40, 50, 60]);
    expect(results.map((r) => r.outputs[0]!.shape)).toEqual(Array(6).fill([1, 1, 1, 1]));
    // The first ran alone, the five that waited as 4 and then 1: three runs, each padded to 4 images.
    expect(results.map((r) => r.batchSize)).toEqual([4, 4, 4, 4, 4, 4]);
    expect(stats).toMatchObject({ started: 6, runs: 3 });
  });

  it('runs every call alone with maxBatch 1 (the CPU default)', async () => {
    const { results, stats } = await runSix(1);
    expect(results.map((r) => tensorBytes(r.outputs[0]!)[0])).toEqual([10, 20, 30, 40, 50, 60]);
    expect(stats).toMatchObject({ started: 6, runs: 6 });
  });

  it('never stacks images of different sizes', async () => {
    const { results, stats } = await runSix(8, [8, 8, 16, 8, 16, 8]);
    expect(results.map((r) => tensorBytes(r.outputs[0]!)[0])).toEqual([10, 20, 30, 40, 50, 60]);
    // After the first: the 8x8 calls (2nd, 4th, 6th) as one run, the 16x16 ones (3rd, 5th) as another.
    expect(stats.runs).toBe(3);
  });
});

describe('batch stacking and splitting', () => {
  it('keys calls by inputs past the batch axis and by outputs', () => {
    expect(batchKey([image(1)], ['mask'])).toBe(batchKey([image(2)], ['mask']));
    expect(batchKey([image(1)], ['mask'])).not.toBe(batchKey([image(1, 16)], ['mask']));
    expect(batchKey([image(1)], ['mask'])).not.toBe(batchKey([image(1)], ['other']));
  });

  it('pads every batch to maxBatch, so an accelerator session sees one shape, the one warmed up', () => {
    expect([1, 2, 3, 4].map((n) => paddedBatchSize(n, 4))).toEqual([4, 4, 4, 4]);
    expect(batchSizes(4)).toEqual([4]);
    const padded = padInputs(stackInputs([[image(7)], [image(9)], [image(11)]]), 1);
    expect(padded[0]!.shape).toEqual([4, 8, 8, 3]);
    expect([...new Uint8Array(padded[0]!.data)].filter((v, i) => i % 192 === 0)).toEqual([7, 9, 11, 0]);
  });

  it('refuses to split an output whose batch axis does not match what was stacked', () => {
    const stacked = stackInputs([[image(1)], [image(2)]]);
    expect(stacked[0]!.shape).toEqual([2, 8, 8, 3]);
    const output: TensorData = { name: 'mask', datatype: 'UINT8', shape: [1, 1, 1, 1], data: new Uint8Array(1).buffer };
    expect(() => splitOutputs([output], [1, 1])).toThrow(/batch 1, the batch stacked 2/);
  });
});
