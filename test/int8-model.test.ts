import ort from 'onnxruntime-node';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import onnxProto from 'onnx-proto';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ISNET_INT8, loadCalibrationTable } from '../src/inference-server/int8-model.js';
import { resolveModelFile } from '../src/inference-server/model-source.js';
import { objectOnTexture } from './helpers/synthetic-image.js';

/** Assembling, preparing and running ISNet twice: seconds on a quiet machine, minutes on a busy 2-core one. */
const MODEL_TIMEOUT_MS = 300_000;

const opsOf = (model: onnxProto.onnx.IModelProto) => {
  const ops = new Map<string, number>();
  for (const n of model.graph?.node ?? []) ops.set(n.opType!, (ops.get(n.opType!) ?? 0) + 1);
  return ops;
};

describe('the 8-bit ISNet (isnet-int8)', () => {
  let dir: string;
  let int8File: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-int8-test-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('is made from the source model and the committed calibration table, cached under a name that carries the table', async () => {
    int8File = await resolveModelFile('isnet-int8', { cacheDir: dir });
    expect(path.basename(int8File)).toMatch(/^isnet-int8-[0-9a-f]{16}-r\d+-t\d+-[0-9a-f]{16}\.onnx$/);
    const model = onnxProto.onnx.ModelProto.decode(await readFile(int8File));
    const ops = opsOf(model);
    const { table } = await loadCalibrationTable(ISNET_INT8.table);
    // Every Conv but those kept in float reads int8 weights through a DequantizeLinear.
    const convs = ops.get('Conv')!;
    const int8Weights = model.graph!.initializer!.filter((t) => t.dataType === 3 && t.dims!.length === 4).length;
    expect(int8Weights).toBe(convs - ISNET_INT8.quantize.keepFloat.filter((n) => n.endsWith('/Conv')).length);
    expect(ops.get('QuantizeLinear')).toBeGreaterThan(100);
    // FP16 is gone: no FP16 initializer, no Cast to FP16.
    expect(model.graph!.initializer!.some((t) => t.dataType === 10)).toBe(false);
    // The activation scales are the table's: the first convolution's output (read by the first
    // 8-bit convolution) is quantized over its measured range, by the recipe's method.
    const tensor = '/conv_in/Conv_output_0';
    const scale = model.graph!.initializer!.find((t) => t.name === `${tensor}/bgcut_scale`)!.floatData![0]!;
    const entry = table.tensors[tensor]!;
    const method = ISNET_INT8.quantize.range;
    const [lo, hi] = method === 'minmax' ? [entry.min, entry.max] : [entry.percentiles[(100 - Number(method.percentile)).toFixed(6).replace(/\.?0+$/, '')]!, entry.percentiles[method.percentile]!];
    expect(scale * 255).toBeCloseTo(Math.max(0, hi) - Math.min(0, lo), 4);

    // Cached: a second start finds the file, checks it and leaves it as it was.
    const before = await stat(int8File);
    expect(await resolveModelFile('isnet-int8', { cacheDir: dir })).toBe(int8File);
    expect((await stat(int8File)).mtimeMs).toBe(before.mtimeMs);
  }, MODEL_TIMEOUT_MS);

  it('ONNX Runtime fuses it into QLinearConv, and its mask of a photo agrees with the prepared float model (IoU >= 0.95)', async () => {
    const image = await objectOnTexture(640, 480);
    const rgb = await sharp(image.bytes).resize(1024, 1024, { fit: 'fill' }).raw().toBuffer();
    const feed = { image: new ort.Tensor('uint8', new Uint8Array(rgb), [1, 1024, 1024, 3]) };
    const optimized = path.join(dir, 'optimized.onnx');
    const masks: Uint8Array[] = [];
    for (const [file, extra] of [
      [int8File, { optimizedModelFilePath: optimized }],
      [await resolveModelFile('isnet', { cacheDir: dir }), {}],
    ] as const) {
      const session = await ort.InferenceSession.create(file, { intraOpNumThreads: 2, graphOptimizationLevel: 'all', ...extra });
      masks.push((await session.run(feed)).mask!.data as Uint8Array);
      await session.release();
    }
    const fused = opsOf(onnxProto.onnx.ModelProto.decode(await readFile(optimized)));
    expect(fused.get('QLinearConv') ?? 0).toBeGreaterThan(100);
    expect(fused.get('Conv') ?? 0).toBeLessThanOrEqual(ISNET_INT8.quantize.keepFloat.length);

    const [int8, float] = masks as [Uint8Array, Uint8Array];
    let inter = 0;
    let union = 0;
    let foreground = 0;
    for (let i = 0; i < float.length; i++) {
      const a = int8[i]! >= 128;
      const b = float[i]! >= 128;
      if (a && b) inter++;
      if (a || b) union++;
      if (b) foreground++;
    }
    // The float model finds the object (not an empty mask both agree on).
    expect(foreground / float.length).toBeGreaterThan(0.1);
    expect(inter / union).toBeGreaterThanOrEqual(0.95);
  }, MODEL_TIMEOUT_MS);
});
