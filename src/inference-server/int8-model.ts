import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import onnxProto from 'onnx-proto';
import { toFloat32Bytes } from './float32-model.js';
import { prepareModel, preparedPixelTensor, type PrepareOptions } from './prepare-model.js';
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
    // The mask head (the 1-channel side output, its 2x upscale to the input size; the Sigmoid
    // is float anyway) runs in float: it is cheap, and the mask's edges are made there. The first
    // convolution runs 8-bit on the pixels themselves (read exactly, no normalisation nodes:
    // QuantizeOptions.pixels): in float it cost ~5 % of the run with its layout reorders.
    keepFloat: ['/side1/Conv', '/Resize_5'],
    // QLinearConcat then copies bytes (it requantized every element: ~5 % of the run); on the
    // calibration photos the agreement with FP32 moved by 0.0001 IoU (docs/model-int8.md).
    shareConcatScales: true,
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
  // The first convolution (unless kept in float) reads the 8-bit pixels the preparation transposed.
  const pixels = { uint8: preparedPixelTensor(prepare), normalized: prepare.sourceInput, mean: prepare.mean, std: prepare.std ?? [1, 1, 1] };
  const report = quantizeModel(model, table, { ...options, pixels });
  return { bytes: onnx.ModelProto.encode(model).finish(), report };
}
