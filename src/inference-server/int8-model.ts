import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import onnxProto from 'onnx-proto';
import { toFloat32Bytes } from './float32-model.js';
import { prepareModel, type PrepareOptions } from './prepare-model.js';
import { quantizeModel, type CalibrationTable, type QuantizeOptions, type QuantizeReport } from './quantize-model.js';

const { onnx } = onnxProto;

/**
 * The 8-bit ISNet (`isnet-int8`): ISNet's FP16 weights widened to FP32, then statically
 * quantized with the committed calibration table (bench/calibrate.ts measured it on the MIT
 * photos of smoke/, never on the evaluation set). What stays in float and why: docs/model-int8.md.
 */
export interface Int8Recipe {
  /** File name of the calibration table in src/inference-server/calibration/. */
  table: string;
  quantize: QuantizeOptions;
}

export const ISNET_INT8: Int8Recipe = {
  table: 'isnet-int8.json',
  quantize: {
    // The 99.99th percentile of the calibration photos' values, not their extremes: a few
    // outliers per tensor would otherwise leave most values a handful of levels (measured with
    // npm run int8-agreement: see docs/model-int8.md).
    range: { percentile: '99.99' },
    // The first convolution (3 -> 64 channels on the pixels: halves the disagreement with FP32
    // on the calibration photos) and the mask head (the 1-channel side output, its 2x upscale to
    // the input size; the Sigmoid is float anyway) run in float: they are cheap, and the mask's
    // edges are made there.
    keepFloat: ['/conv_in/Conv', '/side1/Conv', '/Resize_5'],
  },
};

/** Where the committed tables are: beside the compiled module when packaged, else in the sources. */
export function calibrationDir(): URL {
  return [new URL('./calibration/', import.meta.url), new URL('../../../src/inference-server/calibration/', import.meta.url)].find((url) =>
    existsSync(url),
  )!;
}

export async function loadCalibrationTable(file: string): Promise<{ table: CalibrationTable; sha256: string }> {
  const bytes = await readFile(new URL(file, calibrationDir()));
  return { table: JSON.parse(bytes.toString('utf8')) as CalibrationTable, sha256: createHash('sha256').update(bytes).digest('hex') };
}

/**
 * The 8-bit model from the source (FP16 ISNet): widened to FP32, prepared exactly as the float
 * built-ins are (8-bit pixels in, the mask alone out, any other graph pass prepareModel runs),
 * then quantized. Quantizing last means the calibration table (measured on the FP32 model
 * prepared the same way) names the tensors of this very graph, and that graph passes which add
 * Shape readers (free input size) need not know about QuantizeLinear/DequantizeLinear.
 */
export function makeInt8Model(source: Uint8Array, prepare: PrepareOptions, table: CalibrationTable, options: QuantizeOptions): { bytes: Uint8Array; report: QuantizeReport } {
  const prepared = prepareModel(toFloat32Bytes(source), prepare).bytes;
  const model = onnx.ModelProto.decode(prepared);
  const report = quantizeModel(model, table, options);
  return { bytes: onnx.ModelProto.encode(model).finish(), report };
}
