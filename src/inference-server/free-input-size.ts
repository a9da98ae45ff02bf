import onnxProto from 'onnx-proto';

type Graph = onnxProto.onnx.IGraphProto;
type Node = onnxProto.onnx.INodeProto;

const { INT64 } = onnxProto.onnx.TensorProto.DataType;

/**
 * Frees a U²-Net-style graph (ISNet) from the input size it was exported at.
 *
 * PyTorch's `_upsample_like(src, tar)` exports as `Resize(src, sizes = Concat(Shape(src)[0:2],
 * CONSTANT))`, the constant being `tar`'s height and width at the export size. This pass replaces
 * each such constant with `Shape(tar)[2:4]`, where `tar` is found from the graph itself:
 *  - the Resize's result is concatenated (axis 1) with another tensor: that tensor is `tar`
 *    (the decoder's skip connections, `cat(upsample_like(hx6, hx5), hx5)`);
 *  - otherwise the constant must equal the input's height and width (the side outputs,
 *    `upsample_like(d1, x)`): `tar` is the graph input.
 * Casts between the Resize and its consumer (an FP16 graph resizes in FP32) are looked through.
 * Anything else is refused, so a graph this pass does not understand is never half rewritten.
 * The arithmetic at the export size is unchanged: only where each size comes from.
 *
 * `input` is the name of the graph's image input (NCHW). Mutates `graph`; returns how many Resize
 * sizes now follow their partner.
 */
export function freeInputSize(graph: Graph, input: string, exportSize: { height: number; width: number }): number {
  const nodes = graph.node ?? [];
  const producer = new Map<string, Node>();
  const consumers = new Map<string, Node[]>();
  for (const n of nodes) {
    for (const o of n.output ?? []) producer.set(o, n);
    for (const i of n.input ?? []) {
      if (!consumers.has(i)) consumers.set(i, []);
      consumers.get(i)!.push(n);
    }
  }
  const initializers = new Map((graph.initializer ?? []).map((t) => [t.name!, t]));
  /** The int64 values of a Constant node's output or an initializer; undefined if it is neither. */
  const constantInts = (name: string): number[] | undefined => {
    const tensor = initializers.get(name) ?? producer.get(name)?.attribute?.find((a) => a.name === 'value' && a.t)?.t;
    if (!tensor || (producer.get(name) && producer.get(name)!.opType !== 'Constant')) return undefined;
    if (tensor.dataType !== INT64) return undefined;
    if (tensor.int64Data?.length) return tensor.int64Data.map(Number);
    if (!tensor.rawData) return undefined;
    const raw = tensor.rawData;
    const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
    return Array.from({ length: raw.byteLength / 8 }, (_, i) => Number(view.getBigInt64(i * 8, true)));
  };

  const added: Node[] = [];
  const addedInit: onnxProto.onnx.ITensorProto[] = [];
  const prefix = 'bgcut_free_size/';
  const starts = `${prefix}hw_start`;
  const ends = `${prefix}hw_end`;
  addedInit.push({ name: starts, dataType: INT64, dims: [1], int64Data: [2] }, { name: ends, dataType: INT64, dims: [1], int64Data: [4] });
  /** One Shape → Slice per partner tensor, shared by every Resize that follows it. */
  const sizeOf = new Map<string, string>();
  const spatialSize = (tensor: string): string => {
    let out = sizeOf.get(tensor);
    if (out) return out;
    const id = `${prefix}${sizeOf.size}`;
    out = `${id}/hw`;
    added.push(
      { opType: 'Shape', input: [tensor], output: [`${id}/shape`], name: `${id}/Shape` },
      { opType: 'Slice', input: [`${id}/shape`, starts, ends], output: [out], name: `${id}/Slice` },
    );
    sizeOf.set(tensor, out);
    return out;
  };

  let rewritten = 0;
  for (const resize of nodes.filter((n) => n.opType === 'Resize')) {
    const sizes = resize.input?.[3];
    if (!sizes) {
      // Resize by scales already follows its input's size.
      continue;
    }
    const concat = producer.get(sizes);
    const constantName = concat?.opType === 'Concat' && concat.input?.length === 2 ? concat.input[1]! : undefined;
    const constant = constantName === undefined ? undefined : constantInts(constantName);
    if (!concat || !constant || constant.length !== 2) {
      throw new Error(`Resize ${resize.name}: sizes are not Concat(Shape(x)[0:2], [h, w]); cannot free the input size`);
    }
    // Follow the result through Casts to what uses it.
    let value = resize.output![0]!;
    let users = consumers.get(value) ?? [];
    while (users.length === 1 && users[0]!.opType === 'Cast') {
      value = users[0]!.output![0]!;
      users = consumers.get(value) ?? [];
    }
    const joined = users.find((u) => u.opType === 'Concat' && u.input?.length === 2 && axisOf(u) === 1);
    let partner: string;
    if (joined) {
      partner = joined.input![0] === value ? joined.input![1]! : joined.input![0]!;
    } else if (constant[0] === exportSize.height && constant[1] === exportSize.width) {
      partner = input;
    } else {
      throw new Error(`Resize ${resize.name} to ${constant.join('x')} is joined with nothing and not at the input's size; cannot free the input size`);
    }
    concat.input![1] = spatialSize(partner);
    rewritten++;
  }
  // ONNX wants nodes in topological order: each Shape → Slice goes right after the node that
  // makes its partner (first, for the graph input).
  const order: Node[] = [];
  const pending = new Map<string, Node[]>();
  for (const n of added) {
    const partnerName = n.opType === 'Shape' ? n.input![0]! : undefined;
    if (partnerName === undefined) continue;
    const slice = added[added.indexOf(n) + 1]!;
    const key = producer.has(partnerName) ? partnerName : '';
    if (!pending.has(key)) pending.set(key, []);
    pending.get(key)!.push(n, slice);
  }
  order.push(...(pending.get('') ?? []));
  for (const n of nodes) {
    order.push(n);
    for (const o of n.output ?? []) order.push(...(pending.get(o) ?? []));
  }
  graph.node = order;
  graph.initializer = [...(graph.initializer ?? []), ...addedInit];
  // The replaced constants are now unused; dropping them keeps the graph tidy (ONNX Runtime
  // would drop them anyway).
  const used = new Set(graph.node.flatMap((n) => n.input ?? []));
  graph.node = graph.node.filter((n) => n.opType !== 'Constant' || (n.output ?? []).some((o) => used.has(o)));
  return rewritten;
}

function axisOf(node: Node): number | undefined {
  const a = node.attribute?.find((x) => x.name === 'axis');
  return a ? Number(a.i ?? 0) : undefined;
}
