import onnxProto from 'onnx-proto';
import { freeInputSize } from './free-input-size.js';

const { onnx } = onnxProto;
type Graph = onnxProto.onnx.IGraphProto;
type Node = onnxProto.onnx.INodeProto;

/** ONNX TensorProto element types used here. */
const { FLOAT, UINT8, UINT16, INT64, BOOL } = onnx.TensorProto.DataType;

/** Opsets whose operators the rewrite knows: from 18, ReduceMin/Max take their axes as an input. */
export const PREPARE_OPSETS = { min: 11, max: 21 } as const;

export interface PrepareOptions {
  /** Name of the source graph's image input, FP32 [1,3,H,W] holding `(pixel / 255 - mean) / std`. */
  sourceInput: string;
  /** Name of the source output holding the mask (FP32 [1,1,H,W], probabilities, or logits with `sigmoid`). */
  sourceOutput: string;
  /** Per-channel mean subtracted after dividing by 255, as the source expects. */
  mean: [number, number, number];
  /** Per-channel divisor after the mean. Default 1 (ISNet). */
  std?: [number, number, number];
  /** Channel order the source takes; the prepared input is always the decoder's RGB. Default RGB. */
  channelOrder?: 'RGB' | 'BGR';
  /** The source output holds logits: a sigmoid runs before the stretch (BiRefNet). Default false. */
  sigmoid?: boolean;
  /**
   * Declare the batch free (`-1`): right for graphs that take the batch from the tensor's own
   * shape (ISNet). False keeps the source's batch dimension. Default true.
   */
  freeBatch?: boolean;
  /**
   * 8: the mask stretched to 0..255 inside the graph (min-max, with the "no foreground" rule),
   * exactly what the API would make of the FP32 mask. 16: the probability as value / 65535,
   * left for the API to stretch.
   */
  maskBits: 8 | 16;
  /** Names of the prepared model's input and output. */
  inputName: string;
  outputName: string;
  /** Below this peak the model found nothing and the mask is not stretched (see the API's MIN_STRETCH_PEAK). */
  minStretchPeak: number;
  /**
   * Let the prepared model take any height and width (see free-input-size.ts): its input becomes
   * [N,H,W,3] with H and W free (-1 in metadata) and the mask comes back at the size sent. The
   * arithmetic at the export size is unchanged.
   */
  freeSize?: boolean;
}

/** Prefix of the tensors and nodes the preparation adds. */
const PREPARE_PREFIX = 'bgcut_prepare/';

/** The prepared graph's 8-bit NCHW pixels, in the channel order the source takes: what its normalisation reads. */
export function preparedPixelTensor(options: PrepareOptions): string {
  return PREPARE_PREFIX + ((options.channelOrder ?? 'RGB') === 'BGR' ? 'bgr_u8' : 'nchw_u8');
}

export interface PreparedModelInfo {
  input: { name: string; datatype: 'UINT8'; shape: number[] };
  output: { name: string; datatype: 'UINT8' | 'UINT16'; shape: number[] };
}

/**
 * Rewrites a segmentation model's ONNX graph so that the API does no per-pixel work and the
 * wire carries the fewest bytes:
 *  - input: 8-bit pixels as the decoder produces them (NHWC [N,H,W,3]); the transpose, cast and
 *    normalisation run as the graph's first nodes;
 *  - output: the mask alone, as 8-bit (already stretched) or 16-bit fixed point; every other
 *    output and the nodes that only fed them are dropped.
 * The trunk (weights, precision, operators) is left exactly as it was.
 */
export function prepareModel(source: Uint8Array | onnxProto.onnx.IModelProto, options: PrepareOptions): { bytes: Uint8Array; info: PreparedModelInfo } {
  // A decoded model is rewritten in place (the caller has no further use for it).
  const model = source instanceof Uint8Array ? onnx.ModelProto.decode(source) : source;
  const graph = model.graph;
  if (!graph) throw new Error('the model has no graph');
  const input = graph.input?.find((v) => v.name === options.sourceInput);
  const output = graph.output?.find((v) => v.name === options.sourceOutput);
  if (!input) throw new Error(`the model has no input ${options.sourceInput}`);
  if (!output) throw new Error(`the model has no output ${options.sourceOutput}`);
  const dims = (input.type?.tensorType?.shape?.dim ?? []).map((d) => Number(d.dimValue ?? 0));
  if (input.type?.tensorType?.elemType !== FLOAT || dims.length !== 4 || dims[1] !== 3 || !(dims[2]! > 0 && dims[3]! > 0)) {
    throw new Error(`input ${options.sourceInput} must be FP32 [N,3,H,W] with fixed H and W, got [${dims}]`);
  }
  const [, , exportHeight, exportWidth] = dims as [number, number, number, number];
  if (options.freeSize) freeInputSize(graph, options.sourceInput, { height: exportHeight, width: exportWidth });
  const height = options.freeSize ? -1 : exportHeight;
  const width = options.freeSize ? -1 : exportWidth;
  const opset = Number(model.opsetImport?.find((o) => !o.domain || o.domain === 'ai.onnx')?.version ?? 0);
  if (opset < PREPARE_OPSETS.min || opset > PREPARE_OPSETS.max) {
    throw new Error(`opset ${opset} is not supported (${PREPARE_OPSETS.min}..${PREPARE_OPSETS.max}: Clip takes its bounds as inputs from 11)`);
  }
  const batch = Number(dims[0] ?? 0);

  const prefix = PREPARE_PREFIX;
  const name = (n: string) => prefix + n;
  const constants: onnxProto.onnx.ITensorProto[] = [];
  const constant = (n: string, dataType: number, values: number[], shape: number[] = []) => {
    const tensor: onnxProto.onnx.ITensorProto = { name: name(n), dataType, dims: shape };
    if (dataType === FLOAT) tensor.floatData = values;
    else if (dataType === BOOL || dataType === UINT8) tensor.int32Data = values;
    else if (dataType === INT64) tensor.int64Data = values;
    constants.push(tensor);
    return name(n);
  };
  const node = (opType: string, inputs: string[], outputName: string, attribute: onnxProto.onnx.IAttributeProto[] = []): Node => ({
    opType,
    input: inputs,
    output: [outputName],
    name: name(`${opType}_${outputName.replace(prefix, '')}`),
    attribute,
  });
  const ints = (n: string, values: number[]): onnxProto.onnx.IAttributeProto => ({ name: n, ints: values, type: onnx.AttributeProto.AttributeType.INTS });
  const int = (n: string, value: number): onnxProto.onnx.IAttributeProto => ({ name: n, i: value, type: onnx.AttributeProto.AttributeType.INT });

  // Input: UINT8 NHWC -> NCHW (-> BGR) -> FP32 -> (x / 255 - mean) / std, written to the source
  // input's name so the trunk reads it unchanged. With std 1 these are exactly the nodes ISNet's
  // preparation always had (its prepared file stays byte for byte the same).
  const std = options.std ?? [1, 1, 1];
  const bgr = (options.channelOrder ?? 'RGB') === 'BGR';
  const pre: Node[] = [node('Transpose', [options.inputName], name('nchw_u8'), [ints('perm', [0, 3, 1, 2])])];
  if (bgr) pre.push(node('Gather', [name('nchw_u8'), constant('bgr', INT64, [2, 1, 0], [3])], name('bgr_u8'), [int('axis', 1)]));
  pre.push(node('Cast', [name(bgr ? 'bgr_u8' : 'nchw_u8')], name('nchw_f32'), [int('to', FLOAT)]));
  if (std.every((s) => s === 1)) {
    pre.push(
      node('Mul', [name('nchw_f32'), constant('scale', FLOAT, [1 / 255])], name('unit')),
      node('Sub', [name('unit'), constant('mean', FLOAT, options.mean, [1, 3, 1, 1])], options.sourceInput),
    );
  } else {
    // (x / 255 - mean) / std as one multiply and one subtraction per element.
    pre.push(
      node('Mul', [name('nchw_f32'), constant('scale', FLOAT, std.map((s) => 1 / (255 * s)), [1, 3, 1, 1])], name('unit')),
      node('Sub', [name('unit'), constant('mean', FLOAT, options.mean.map((m, c) => m / std[c]!), [1, 3, 1, 1])], options.sourceInput),
    );
  }

  // Output: the mask alone, in fixed point; logits become probabilities first.
  const post: Node[] = [];
  if (options.sigmoid) post.push(node('Sigmoid', [options.sourceOutput], name('probability')));
  const mask = options.sigmoid ? name('probability') : options.sourceOutput;
  // Per image ([N,1,1,1]), so images batched together never change each other's mask. From
  // opset 18 the axes are an input, before it an attribute.
  const reduce = (opType: string, out: string) =>
    opset >= 18
      ? node(opType, [mask, constant(`${out}_axes`, INT64, [1, 2, 3], [3])], name(out), [int('keepdims', 1)])
      : node(opType, [mask], name(out), [ints('axes', [1, 2, 3]), int('keepdims', 1)]);
  if (options.maskBits === 8) {
    // The API's stretch, in the graph: lo..hi -> 0..255, unless the map is flat or peaks below
    // minStretchPeak (no foreground: the noise must not be stretched into one).
    post.push(
      reduce('ReduceMin', 'lo'),
      reduce('ReduceMax', 'hi'),
      node('Sub', [name('hi'), name('lo')], name('range')),
      node('Greater', [name('range'), constant('min_range', FLOAT, [1e-6])], name('has_range')),
      node('Less', [name('hi'), constant('min_peak', FLOAT, [options.minStretchPeak])], name('low_peak')),
      node('Not', [name('has_range')], name('flat')),
      node('Or', [name('flat'), name('low_peak')], name('no_stretch')),
      node('Where', [name('no_stretch'), constant('zero', FLOAT, [0]), name('lo')], name('lo_used')),
      node('Where', [name('no_stretch'), constant('one', FLOAT, [1]), name('hi')], name('hi_used')),
      node('Sub', [name('hi_used'), name('lo_used')], name('range_used')),
      node('Div', [constant('full', FLOAT, [255]), name('range_used')], name('gain')),
      node('Sub', [mask, name('lo_used')], name('shifted')),
      node('Mul', [name('shifted'), name('gain')], name('scaled')),
      node('Clip', [name('scaled'), constant('clip_lo', FLOAT, [0]), constant('clip_hi', FLOAT, [255])], name('clipped')),
      node('Round', [name('clipped')], name('rounded')),
      node('Cast', [name('rounded')], options.outputName, [int('to', UINT8)]),
    );
  } else {
    post.push(
      node('Clip', [mask, constant('clip_lo', FLOAT, [0]), constant('clip_hi', FLOAT, [1])], name('clipped')),
      node('Mul', [name('clipped'), constant('full', FLOAT, [65535])], name('scaled')),
      node('Round', [name('scaled')], name('rounded')),
      node('Cast', [name('rounded')], options.outputName, [int('to', UINT16)]),
    );
  }

  const trunk = reachable(graph, [options.sourceOutput]);
  const nodes = [...pre, ...trunk, ...post];
  const used = new Set(nodes.flatMap((n) => n.input ?? []));
  graph.node = nodes;
  graph.initializer = [...(graph.initializer ?? []).filter((t) => used.has(t.name!)), ...constants];
  // Shapes inferred for batch 1 would pin the batch again: ONNX Runtime infers them anew.
  graph.valueInfo = [];
  // The batch is left free: ISNet's Resize sizes take the batch from the tensor's own shape, so
  // several images can run in one call (what Triton's dynamic batcher does on GPUs).
  const names = ['batch', 'height', 'width'];
  const tensorType = (elemType: number, shape: number[]) => {
    // A fixed batch (a family model's) leaves the free names to height and width.
    const free = shape[0]! > 0 ? names.slice(1) : [...names];
    return { tensorType: { elemType, shape: { dim: shape.map((d) => (d > 0 ? { dimValue: d } : { dimParam: free.shift()! })) } } };
  };
  const n = (options.freeBatch ?? true) || !(batch > 0) ? -1 : batch;
  const info: PreparedModelInfo = {
    input: { name: options.inputName, datatype: 'UINT8', shape: [n, height, width, 3] },
    output: { name: options.outputName, datatype: options.maskBits === 8 ? 'UINT8' : 'UINT16', shape: [n, 1, height, width] },
  };
  graph.input = [{ name: info.input.name, type: tensorType(UINT8, info.input.shape) }];
  graph.output = [{ name: info.output.name, type: tensorType(options.maskBits === 8 ? UINT8 : UINT16, info.output.shape) }];
  model.producerName = 'bgcut-prepare';
  return { bytes: onnx.ModelProto.encode(model).finish(), info };
}

/** The nodes needed to compute `outputs`, in their original (topological) order. */
function reachable(graph: Graph, outputs: string[]): Node[] {
  const producer = new Map<string, Node>();
  for (const n of graph.node ?? []) for (const o of n.output ?? []) producer.set(o, n);
  const keep = new Set<Node>();
  const stack = [...outputs];
  while (stack.length > 0) {
    const value = stack.pop()!;
    const n = producer.get(value);
    if (!n || keep.has(n)) continue;
    keep.add(n);
    stack.push(...(n.input ?? []).filter(Boolean));
  }
  return (graph.node ?? []).filter((n) => keep.has(n));
}
