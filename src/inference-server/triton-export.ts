import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import onnxProto from 'onnx-proto';

const { onnx } = onnxProto;

/** ONNX element types to Triton's config datatypes (model_config.proto DataType). */
const TRITON_TYPES: Record<number, string> = {
  1: 'TYPE_FP32',
  2: 'TYPE_UINT8',
  3: 'TYPE_INT8',
  4: 'TYPE_UINT16',
  5: 'TYPE_INT16',
  6: 'TYPE_INT32',
  7: 'TYPE_INT64',
  9: 'TYPE_BOOL',
  10: 'TYPE_FP16',
  11: 'TYPE_FP64',
  12: 'TYPE_UINT32',
  13: 'TYPE_UINT64',
};

export interface TritonExportOptions {
  /** The model's name in the repository, which clients (and the API's `modelName`) use. */
  name: string;
  /** The ONNX file to serve. */
  modelFile: string;
  /** Where Triton runs each instance: `KIND_CPU` or `KIND_GPU`. Default KIND_CPU. */
  instanceKind?: 'KIND_CPU' | 'KIND_GPU';
  /** Model instances (each its own session). Default 1. */
  instances?: number;
  /**
   * Largest batch Triton's dynamic batcher may form from queued requests; 0 (the default) for
   * none. Worth it on GPUs; on CPU one image already keeps the cores busy.
   */
  maxBatch?: number;
}

export interface TensorConfig {
  name: string;
  dataType: string;
  dims: number[];
}

/** The model's graph inputs and outputs as Triton config entries (-1 for a free dimension). */
export function tensorConfigs(modelBytes: Uint8Array): { inputs: TensorConfig[]; outputs: TensorConfig[] } {
  const model = onnx.ModelProto.decode(modelBytes);
  const initializers = new Set((model.graph?.initializer ?? []).map((t) => t.name));
  const convert = (v: onnxProto.onnx.IValueInfoProto): TensorConfig => {
    const tensor = v.type?.tensorType;
    const dataType = TRITON_TYPES[tensor?.elemType ?? 0];
    if (!tensor || !dataType) throw new Error(`value ${v.name} is not a tensor of a type Triton serves`);
    const dims = (tensor.shape?.dim ?? []).map((d) => (d.dimValue !== undefined && d.dimValue !== null && Number(d.dimValue) > 0 ? Number(d.dimValue) : -1));
    return { name: v.name!, dataType, dims };
  };
  return {
    inputs: (model.graph?.input ?? []).filter((v) => !initializers.has(v.name)).map(convert),
    outputs: (model.graph?.output ?? []).map(convert),
  };
}

/**
 * Triton's model configuration (protobuf text format). With `max_batch_size: 0` the dims are the
 * whole shape, batch included; with a batch size, the dims leave out the (free) first dimension
 * and the dynamic batcher groups queued requests.
 */
export function tritonConfig(options: Required<Omit<TritonExportOptions, 'modelFile'>>, tensors: { inputs: TensorConfig[]; outputs: TensorConfig[] }): string {
  const batched = options.maxBatch > 0;
  if (batched && [...tensors.inputs, ...tensors.outputs].some((t) => t.dims[0] !== -1)) {
    throw new Error('batching needs a model whose first dimension is free in every input and output');
  }
  const block = (t: TensorConfig) => `  {\n    name: "${t.name}"\n    data_type: ${t.dataType}\n    dims: [ ${(batched ? t.dims.slice(1) : t.dims).join(', ')} ]\n  }`;
  return [
    `name: "${options.name}"`,
    'platform: "onnxruntime_onnx"',
    `max_batch_size: ${options.maxBatch}`,
    `input [\n${tensors.inputs.map(block).join(',\n')}\n]`,
    `output [\n${tensors.outputs.map(block).join(',\n')}\n]`,
    `instance_group [\n  {\n    count: ${options.instances}\n    kind: ${options.instanceKind}\n  }\n]`,
    ...(batched ? ['dynamic_batching { max_queue_delay_microseconds: 2000 }'] : []),
    'version_policy: { latest: { num_versions: 1 } }',
    '',
  ].join('\n');
}

/**
 * Writes a Triton model repository serving `modelFile` as version 1:
 *   <dir>/<name>/config.pbtxt
 *   <dir>/<name>/1/model.onnx
 * The same folder serves KServe (a v2 InferenceService with the Triton runtime) and any other
 * Open Inference Protocol server that reads Triton's layout.
 */
export async function exportTritonRepository(dir: string, options: TritonExportOptions): Promise<{ configFile: string; modelFile: string }> {
  if (!/^[A-Za-z0-9_.-]{1,64}$/.test(options.name)) throw new RangeError('model name must be 1-64 of [A-Za-z0-9_.-]');
  const instances = options.instances ?? 1;
  if (!Number.isInteger(instances) || instances < 1) throw new RangeError('instances must be a positive integer');
  const maxBatch = options.maxBatch ?? 0;
  if (!Number.isInteger(maxBatch) || maxBatch < 0) throw new RangeError('maxBatch must be an integer >= 0');
  const tensors = tensorConfigs(await readFile(options.modelFile));
  const modelDir = path.join(dir, options.name);
  await mkdir(path.join(modelDir, '1'), { recursive: true });
  const modelFile = path.join(modelDir, '1', 'model.onnx');
  const configFile = path.join(modelDir, 'config.pbtxt');
  await copyFile(options.modelFile, modelFile);
  await writeFile(configFile, tritonConfig({ name: options.name, instanceKind: options.instanceKind ?? 'KIND_CPU', instances, maxBatch }, tensors));
  return { configFile, modelFile };
}
