import onnxProto from 'onnx-proto';

const { onnx } = onnxProto;
type Model = onnxProto.onnx.IModelProto;

/** ONNX TensorProto element types used here. */
const { FLOAT, FLOAT16 } = onnx.TensorProto.DataType;

/**
 * Rewrites a model stored in FP16 (ISNet as shipped: FP16 weights, FP16 activations, Casts at
 * the graph's edges and around each Resize) into plain FP32: every FP16 initializer is widened
 * (exactly: each FP16 value is an FP32 value) and every Cast between FP16 and FP32 disappears.
 * The 8-bit pass starts from this graph: its calibration ranges and weight scales are taken in
 * FP32, and ONNX Runtime's QDQ fusions look for Conv in FP32 between DequantizeLinear and
 * QuantizeLinear. Tensor names are kept (a removed Cast's output takes its input's name, except
 * a graph output, whose name wins), so calibration tables name the same tensors as this graph.
 * The model is changed in place.
 */
export function toFloat32(model: Model): Model {
  const graph = model.graph;
  if (!graph) throw new Error('the model has no graph');
  const elemType = new Map<string, number>();
  for (const v of [...(graph.input ?? []), ...(graph.output ?? []), ...(graph.valueInfo ?? [])]) {
    if (v.name && v.type?.tensorType?.elemType) elemType.set(v.name, v.type.tensorType.elemType);
  }
  for (const t of graph.initializer ?? []) {
    if (t.name) elemType.set(t.name, t.dataType ?? 0);
    if (t.dataType === FLOAT16) widenInitializer(t);
  }
  for (const n of graph.node ?? []) {
    for (const a of n.attribute ?? []) {
      if (a.t?.dataType === FLOAT16) widenInitializer(a.t);
    }
  }

  const isFloat = (type: number | undefined) => type === FLOAT || type === FLOAT16;
  const outputs = new Set((graph.output ?? []).map((o) => o.name));
  const rename = new Map<string, string>();
  const kept: onnxProto.onnx.INodeProto[] = [];
  for (const n of graph.node ?? []) {
    const to = Number(n.attribute?.find((a) => a.name === 'to')?.i ?? 0);
    const from = n.input?.[0];
    if (n.opType === 'Cast' && isFloat(to) && from && isFloat(elemType.get(from))) {
      const out = n.output![0]!;
      if (outputs.has(out)) rename.set(from, out);
      else rename.set(out, from);
      continue;
    }
    kept.push(n);
  }
  const resolve = (name: string) => {
    let current = name;
    for (let hops = 0; rename.has(current) && hops < 1000; hops++) current = rename.get(current)!;
    return current;
  };
  for (const n of kept) {
    n.input = (n.input ?? []).map((i) => (i ? resolve(i) : i));
    n.output = (n.output ?? []).map(resolve);
  }
  graph.node = kept;
  for (const v of [...(graph.input ?? []), ...(graph.output ?? [])]) {
    if (v.type?.tensorType?.elemType === FLOAT16) v.type.tensorType.elemType = FLOAT;
  }
  // FP16 value types would contradict the new graph: ONNX Runtime infers them anew.
  graph.valueInfo = [];
  return model;
}

/** Decodes and re-encodes a model after toFloat32 (convenience for callers holding bytes). */
export function toFloat32Bytes(source: Uint8Array): Uint8Array {
  const model = toFloat32(onnx.ModelProto.decode(source));
  return onnx.ModelProto.encode(model).finish();
}

/** FP16 tensor -> FP32 tensor, in place (raw little-endian data or the int32_data form). */
function widenInitializer(tensor: onnxProto.onnx.ITensorProto): void {
  let halves: Uint16Array;
  if (tensor.rawData && tensor.rawData.length > 0) {
    const raw = tensor.rawData;
    const aligned = new Uint8Array(raw.length);
    aligned.set(raw);
    halves = new Uint16Array(aligned.buffer);
  } else {
    halves = Uint16Array.from(tensor.int32Data ?? []);
  }
  const floats = new Float32Array(halves.length);
  for (let i = 0; i < halves.length; i++) floats[i] = halfToFloat(halves[i]!);
  tensor.dataType = FLOAT;
  tensor.int32Data = [];
  tensor.rawData = new Uint8Array(floats.buffer);
}

/**
 * IEEE 754 binary16 -> number (Node 20 has no Float16Array; hand-written, exact for every
 * value including subnormals, infinities and NaN).
 */
export function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exponent = (h >> 10) & 0x1f;
  const fraction = h & 0x3ff;
  if (exponent === 0) return sign * fraction * 2 ** -24;
  if (exponent === 0x1f) return fraction ? NaN : sign * Infinity;
  return sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
}
