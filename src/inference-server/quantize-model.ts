import onnxProto from 'onnx-proto';

const { onnx } = onnxProto;
type Model = onnxProto.onnx.IModelProto;
type Node = onnxProto.onnx.INodeProto;
type Tensor = onnxProto.onnx.ITensorProto;

/** ONNX TensorProto element types used here. */
const { FLOAT, UINT8, INT8, INT32 } = onnx.TensorProto.DataType;

/** Operators that run on 8-bit tensors once ONNX Runtime has fused their QDQ pairs. */
const QUANTIZABLE = new Set(['Conv', 'MaxPool', 'Concat', 'Add', 'Resize']);
/** Operators that only move or pick values: their output keeps their input's scale and zero point, so ONNX Runtime can drop the pair around them. */
const SAME_SCALE = new Set(['MaxPool', 'Resize']);

/**
 * Activation ranges measured on calibration photos, per tensor of the FP32 graph (see
 * bench/calibrate.ts). `min`/`max` are the extremes seen; `percentiles` the value below which
 * that share of all values fell (keys such as "99.99", low tails keyed "0.01").
 */
export interface CalibrationTable {
  /** What the ranges were measured on: the source resource and its chunk-list hash, the input size, the photos. */
  source: { resource: string; chunkListHash: string };
  inputSize: number;
  photos: string[];
  augmentations: string[];
  tensors: Record<string, { min: number; max: number; percentiles: Record<string, number> }>;
}

export interface QuantizeOptions {
  /** How a tensor's range is taken from the table: the extremes, or a percentile pair (e.g. "99.999"). */
  range: 'minmax' | { percentile: string };
  /** Nodes (by name) left in FP32; their neighbours still run 8-bit. */
  keepFloat: string[];
  /**
   * Give each quantized Concat's inputs its output's scale and zero point (one range: the union
   * of theirs), so that QLinearConcat copies bytes instead of requantizing every element. The
   * inputs' producers (convolutions, additions) requantize anyway, so this costs only
   * resolution on the input with the narrower range.
   */
  shareConcatScales?: boolean;
  /**
   * The graph's image normalisation, `(pixel / 255 - mean) / std` from the 8-bit tensor `uint8`
   * into the tensor `normalized`. Given, the convolutions that read `normalized` (unless kept in
   * float) read the 8-bit pixels themselves: the pixels are dequantized exactly (scale 1/255, a
   * zero point near 255 x mean), std and the zero point's rounding are folded into their weights
   * and biases, and the normalisation's float nodes disappear.
   */
  pixels?: { uint8: string; normalized: string; mean: number[]; std: number[] };
  /** Every convolution's weights in 7 bits (-63..63) instead of 8, as `pixels`' convolutions always are. */
  sevenBitWeights?: boolean;
}

export interface QuantizeReport {
  /** Convolutions that run on 8-bit weights and activations. */
  quantizedConvs: number;
  floatConvs: string[];
  /** Tensors carried as uint8 between operators. */
  quantizedTensors: number;
}

/**
 * Static 8-bit quantization in the QDQ form ONNX Runtime fuses: every activation between
 * quantizable operators is followed by QuantizeLinear -> DequantizeLinear (uint8, per tensor,
 * range from the calibration table), Conv weights become int8 per output channel (symmetric,
 * zero point 0) behind a DequantizeLinear, biases int32 at input scale x weight scale. With
 * graphOptimizationLevel 'all', ONNX Runtime turns DQ -> Conv -> Q into QLinearConv (VNNI on CPUs
 * that have it), DQ -> Concat/Add -> Q into QLinearConcat/QLinearAdd, and drops the pairs around
 * MaxPool and Resize, which then run on uint8. A Relu right after a quantized Conv is folded into
 * the Conv's QuantizeLinear (zero point 0 clips at 0 exactly as Relu does).
 *
 * Expects an FP32 graph (see toFloat32). The model is changed in place.
 */
export function quantizeModel(model: Model, table: CalibrationTable, options: QuantizeOptions): QuantizeReport {
  const graph = model.graph;
  if (!graph) throw new Error('the model has no graph');
  const opset = Number(model.opsetImport?.find((o) => !o.domain || o.domain === 'ai.onnx')?.version ?? 0);
  if (opset < 13) throw new Error(`opset ${opset}: per-channel DequantizeLinear needs opset 13 or later`);
  const keepFloat = new Set(options.keepFloat);
  const initializers = new Map((graph.initializer ?? []).map((t) => [t.name!, t]));
  const rangeOf = (tensor: string): [number, number] | undefined => {
    const entry = table.tensors[tensor];
    if (!entry) return undefined;
    if (options.range === 'minmax') return [entry.min, entry.max];
    const p = options.range.percentile;
    const low = entry.percentiles[(100 - Number(p)).toFixed(6).replace(/\.?0+$/, '')];
    const high = entry.percentiles[p];
    if (low === undefined || high === undefined) throw new Error(`the calibration table has no ${p} percentile for ${tensor}`);
    return [low, high];
  };
  const isActivation = (name: string | undefined) => !!name && !initializers.has(name) && table.tensors[name] !== undefined;

  // Data inputs of a node (what is quantized): weights and Resize's roi/scales/sizes are not.
  const dataInputs = (n: Node): string[] => {
    const inputs = (n.input ?? []).filter(Boolean);
    if (n.opType === 'Conv' || n.opType === 'MaxPool' || n.opType === 'Resize') return inputs.slice(0, 1);
    return inputs;
  };
  const nodes = graph.node ?? [];
  const consumers = () => {
    const map = new Map<string, Node[]>();
    for (const n of graph.node ?? []) for (const i of n.input ?? []) if (i) (map.get(i) ?? map.set(i, []).get(i)!).push(n);
    return map;
  };

  // A Conv whose output only feeds a Relu is measured after the Relu (the Relu is folded, below).
  const reluAfter = (n: Node): Node | undefined => {
    const readers = nodes.filter((m) => m.input?.includes(n.output?.[0] ?? ''));
    return n.opType === 'Conv' && readers.length === 1 && readers[0]!.opType === 'Relu' ? readers[0] : undefined;
  };
  const quantized = new Set<Node>(
    nodes.filter(
      (n) =>
        QUANTIZABLE.has(n.opType ?? '') &&
        !keepFloat.has(n.name ?? '') &&
        dataInputs(n).every(isActivation) &&
        isActivation(reluAfter(n)?.output?.[0] ?? n.output?.[0]) &&
        (n.opType !== 'Conv' || initializers.get(n.input?.[1] ?? '')?.dataType === FLOAT),
    ),
  );
  for (const name of keepFloat) {
    if (!nodes.some((n) => n.name === name)) throw new Error(`keepFloat names no node of the model: ${name}`);
  }

  // Relu folded into the quantized Conv before it: the Conv writes the Relu's output tensor.
  const relus = new Set<Node>();
  {
    const users = consumers();
    for (const conv of [...quantized].filter((n) => n.opType === 'Conv')) {
      const out = conv.output![0]!;
      const next = users.get(out) ?? [];
      const relu = next[0];
      if (next.length !== 1 || relu?.opType !== 'Relu' || !isActivation(relu.output?.[0])) continue;
      conv.output = [relu.output![0]!];
      relus.add(relu);
    }
  }
  graph.node = nodes.filter((n) => !relus.has(n));

  // Scale and zero point of each tensor that crosses into or out of a quantized node.
  const params = new Map<string, { scale: number; zeroPoint: number }>();
  const pixels = options.pixels;
  const pixelReaders = pixels ? graph.node.filter((n) => n.input?.includes(pixels.normalized)) : [];
  const readsPixels = !!pixels && pixelReaders.length > 0 && pixelReaders.every((n) => quantized.has(n) && n.opType === 'Conv');
  if (readsPixels) {
    // x_c = (pixel / 255 - mean_c) / std_c = (dq + zeroPoint / 255 - mean_c) / std_c with
    // dq = (pixel - zeroPoint) / 255; so w' = w / std_c and b' = b + sum w' (zeroPoint / 255 - mean_c).
    const zeroPoint = Math.round((255 * pixels.mean.reduce((a, b) => a + b, 0)) / pixels.mean.length);
    params.set(pixels.normalized, { scale: 1 / 255, zeroPoint });
    for (const conv of pixelReaders) {
      const weight = initializers.get(conv.input![1]!)!;
      const w = floatsOf(weight);
      const [outChannels, inChannels] = [Number(weight.dims![0]), Number(weight.dims![1])];
      if (inChannels !== pixels.mean.length) throw new Error(`${conv.name} reads ${inChannels} channels of the pixels, not ${pixels.mean.length}`);
      const taps = w.length / (outChannels * inChannels);
      const bias = conv.input![2] ? floatsOf(initializers.get(conv.input![2])!) : new Float32Array(outChannels);
      const folded = new Float32Array(w.length);
      const shifted = Float32Array.from(bias);
      for (let o = 0; o < outChannels; o++) {
        for (let c = 0; c < inChannels; c++) {
          const shift = zeroPoint / 255 - pixels.mean[c]!;
          for (let k = 0; k < taps; k++) {
            const i = (o * inChannels + c) * taps + k;
            folded[i] = w[i]! / pixels.std[c]!;
            shifted[o]! += folded[i]! * shift;
          }
        }
      }
      const wName = `${conv.name}/bgcut_pixel_weight`;
      const bName = `${conv.name}/bgcut_pixel_bias`;
      const foldedWeight: Tensor = { name: wName, dataType: FLOAT, dims: weight.dims, rawData: new Uint8Array(folded.buffer) };
      const shiftedBias: Tensor = { name: bName, dataType: FLOAT, dims: [outChannels], rawData: new Uint8Array(shifted.buffer) };
      initializers.set(wName, foldedWeight).set(bName, shiftedBias);
      graph.initializer = [...(graph.initializer ?? []), foldedWeight, shiftedBias];
      conv.input = [conv.input![0]!, wName, bName];
    }
  }
  const paramsOf = (range: [number, number]) => {
    // The range must hold 0 (zero padding and Relu's zeros are exact), uint8 asymmetric.
    const lo = Math.min(0, range[0]);
    const hi = Math.max(0, range[1], lo + 1e-6);
    const scale = (hi - lo) / 255;
    const zeroPoint = Math.min(255, Math.max(0, Math.round(-lo / scale)));
    return { scale, zeroPoint };
  };
  // Tensors that must share one scale: a same-scale operator's input and output, and (with
  // shareConcatScales) a Concat's inputs and output. Each group takes the union of its ranges.
  const group = new Map<string, string>();
  const root = (t: string): string => {
    let r = t;
    while (group.has(r) && group.get(r) !== r) r = group.get(r)!;
    return r;
  };
  const join = (a: string, b: string) => {
    const [ra, rb] = [root(a), root(b)];
    if (ra !== rb) group.set(rb, ra);
  };
  for (const n of graph.node) {
    if (!quantized.has(n)) continue;
    const out = n.output![0]!;
    if (SAME_SCALE.has(n.opType!) || (options.shareConcatScales && n.opType === 'Concat')) for (const i of dataInputs(n)) join(out, i);
  }
  // A same-scale operator's output adds no range of its own (it holds its input's values).
  const sameScaleOutputs = new Set(graph.node.filter((n) => quantized.has(n) && SAME_SCALE.has(n.opType!)).map((n) => n.output![0]!));
  const groupRange = new Map<string, [number, number]>();
  for (const n of graph.node) {
    if (!quantized.has(n)) continue;
    for (const t of [...dataInputs(n), n.output![0]!]) {
      if (sameScaleOutputs.has(t)) continue;
      const range = rangeOf(t);
      if (!range) throw new Error(`the calibration table has no range for ${t}`);
      const r = root(t);
      const seen = groupRange.get(r);
      groupRange.set(r, seen ? [Math.min(seen[0], range[0]), Math.max(seen[1], range[1])] : range);
    }
  }
  for (const n of graph.node) {
    if (!quantized.has(n)) continue;
    for (const t of [...dataInputs(n), n.output![0]!]) if (!params.has(t)) params.set(t, paramsOf(groupRange.get(root(t))!));
  }

  const added: Tensor[] = [];
  const scalar = (name: string, dataType: number, value: number): string => {
    const t: Tensor = { name, dataType, dims: [] };
    if (dataType === FLOAT) t.floatData = [value];
    else t.int32Data = [value];
    added.push(t);
    return name;
  };

  // Each Conv's input before the rewiring below (its bias scale is that tensor's scale x the weight's).
  const convInput = new Map(graph.node.filter((n) => n.opType === 'Conv').map((n) => [n, n.input![0]!]));

  // QuantizeLinear -> DequantizeLinear after each such tensor; readers are rewired to the pair.
  const producer = new Map<string, Node>();
  for (const n of graph.node) for (const o of n.output ?? []) producer.set(o, n);
  const users = consumers();
  const inserted = new Map<Node | undefined, Node[]>();
  for (const [tensor, { scale, zeroPoint }] of params) {
    const q = `${tensor}/bgcut_q`;
    const dq = `${tensor}/bgcut_dq`;
    const s = scalar(`${tensor}/bgcut_scale`, FLOAT, scale);
    const z = scalar(`${tensor}/bgcut_zero_point`, UINT8, zeroPoint);
    const from = producer.get(tensor);
    // The normalised image is read from the 8-bit pixels themselves: a DequantizeLinear alone.
    const fromPixels = readsPixels && tensor === pixels.normalized;
    const pair: Node[] = fromPixels
      ? [{ opType: 'DequantizeLinear', name: `${tensor}/bgcut_DequantizeLinear`, input: [pixels.uint8, s, z], output: [dq] }]
      : [
          { opType: 'QuantizeLinear', name: `${tensor}/bgcut_QuantizeLinear`, input: [tensor, s, z], output: [q] },
          { opType: 'DequantizeLinear', name: `${tensor}/bgcut_DequantizeLinear`, input: [q, s, z], output: [dq] },
        ];
    // A quantized producer must feed its QuantizeLinear alone (or ONNX Runtime will not fuse it);
    // a float producer keeps feeding float readers the exact values.
    const fromQuantized = !!from && quantized.has(from);
    for (const reader of users.get(tensor) ?? []) {
      const toQuantized = quantized.has(reader);
      if (!toQuantized && !fromQuantized && reader.opType !== 'Shape') continue;
      reader.input = reader.input!.map((i) => (i !== tensor ? i : reader.opType === 'Shape' ? (fromQuantized ? q : tensor) : dq));
    }
    (inserted.get(from) ?? inserted.set(from, []).get(from)!).push(...pair);
  }

  // Weights int8 per output channel, symmetric; biases int32 at input scale x weight scale.
  let quantizedConvs = 0;
  for (const conv of graph.node) {
    if (conv.opType !== 'Conv' || !quantized.has(conv)) continue;
    quantizedConvs++;
    const weight = initializers.get(conv.input![1]!)!;
    const w = floatsOf(weight);
    const channels = Number(weight.dims![0]);
    const perChannel = w.length / channels;
    // x86 kernels without VNNI (and some with it) add pairs of uint8 x int8 products in 16 bits,
    // which saturate past 32767: 2 x 255 x 127 does. Activations after a Relu are mostly small,
    // but pixels are not: a convolution on the pixels gets 7-bit weights (2 x 255 x 63 fits).
    const levels = options.sevenBitWeights || pixelReaders.includes(conv) ? 63 : 127;
    const wScale = new Float32Array(channels);
    const wq = new Int8Array(w.length);
    for (let c = 0; c < channels; c++) {
      let peak = 0;
      for (let i = c * perChannel; i < (c + 1) * perChannel; i++) peak = Math.max(peak, Math.abs(w[i]!));
      const scale = peak > 0 ? peak / levels : 1;
      wScale[c] = scale;
      for (let i = c * perChannel; i < (c + 1) * perChannel; i++) wq[i] = Math.max(-levels, Math.min(levels, Math.round(w[i]! / scale)));
    }
    const base = `${conv.name}/bgcut_weight`;
    added.push(
      { name: `${base}_int8`, dataType: INT8, dims: weight.dims, rawData: new Uint8Array(wq.buffer) },
      { name: `${base}_scale`, dataType: FLOAT, dims: [channels], rawData: new Uint8Array(wScale.buffer) },
      { name: `${base}_zero_point`, dataType: INT8, dims: [channels], rawData: new Uint8Array(channels) },
    );
    const dequantize: Node[] = [
      { opType: 'DequantizeLinear', name: `${base}_DequantizeLinear`, input: [`${base}_int8`, `${base}_scale`, `${base}_zero_point`], output: [`${base}_dq`], attribute: [axis0()] },
    ];
    const inputs = [conv.input![0]!, `${base}_dq`];
    const biasName = conv.input![2];
    if (biasName) {
      const bias = floatsOf(initializers.get(biasName)!);
      const inScale = params.get(convInput.get(conv)!)!.scale;
      const bScale = new Float32Array(channels);
      const bq = new Int32Array(channels);
      for (let c = 0; c < channels; c++) {
        bScale[c] = inScale * wScale[c]!;
        bq[c] = Math.max(-(2 ** 31) + 1, Math.min(2 ** 31 - 1, Math.round(bias[c]! / bScale[c]!)));
      }
      const b = `${conv.name}/bgcut_bias`;
      added.push(
        { name: `${b}_int32`, dataType: INT32, dims: [channels], rawData: new Uint8Array(bq.buffer) },
        { name: `${b}_scale`, dataType: FLOAT, dims: [channels], rawData: new Uint8Array(bScale.buffer) },
        { name: `${b}_zero_point`, dataType: INT32, dims: [channels], rawData: new Uint8Array(channels * 4) },
      );
      dequantize.push({ opType: 'DequantizeLinear', name: `${b}_DequantizeLinear`, input: [`${b}_int32`, `${b}_scale`, `${b}_zero_point`], output: [`${b}_dq`], attribute: [axis0()] });
      inputs.push(`${b}_dq`);
    }
    conv.input = inputs;
    (inserted.get(undefined) ?? inserted.set(undefined, []).get(undefined)!).push(...dequantize);
  }

  // Keep the node list topological: new nodes right after the node whose output they read.
  const ordered: Node[] = [...(inserted.get(undefined) ?? [])];
  for (const n of graph.node) ordered.push(n, ...(inserted.get(n) ?? []));
  // Nodes nothing reads any more (the normalisation, once the pixels are read directly).
  const outputs = new Set((graph.output ?? []).map((o) => o.name));
  for (let removed = true; removed; ) {
    const read = new Set(ordered.flatMap((n) => n.input ?? []));
    const before = ordered.length;
    ordered.splice(0, ordered.length, ...ordered.filter((n) => (n.output ?? []).some((o) => read.has(o) || outputs.has(o))));
    removed = ordered.length < before;
  }
  graph.node = ordered;
  const used = new Set(ordered.flatMap((n) => n.input ?? []));
  graph.initializer = [...(graph.initializer ?? []).filter((t) => used.has(t.name!)), ...added];
  graph.valueInfo = [];
  const floatConvs = graph.node.filter((n) => n.opType === 'Conv' && !quantized.has(n)).map((n) => n.name ?? '');
  return { quantizedConvs, floatConvs, quantizedTensors: params.size };
}

/** The tensors a calibration run measures: the outputs of the trunk's float operators, and the image input. */
export function activationTensors(model: Model): string[] {
  const graph = model.graph!;
  const initializers = new Set((graph.initializer ?? []).map((t) => t.name));
  const readersOf = new Map<string, Node[]>();
  for (const n of graph.node ?? []) for (const i of n.input ?? []) if (i) (readersOf.get(i) ?? readersOf.set(i, []).get(i)!).push(n);
  const names = new Set<string>();
  for (const n of graph.node ?? []) {
    const op = n.opType ?? '';
    const concatOfTensors = op === 'Concat' && Number(n.attribute?.find((a) => a.name === 'axis')?.i ?? 0) === 1;
    if (op === 'Conv') names.add(n.input![0]!);
    // A Conv output read by a Relu alone is never quantized (the Relu's output is).
    const readers = (readersOf.get(n.output?.[0] ?? '') ?? []);
    if (op === 'Conv' && readers.length === 1 && readers[0]!.opType === 'Relu') continue;
    if (op === 'Conv' || op === 'Relu' || op === 'MaxPool' || op === 'Add' || op === 'Resize' || op === 'Sigmoid' || concatOfTensors) {
      for (const o of n.output ?? []) if (!initializers.has(o)) names.add(o);
    }
  }
  return [...names];
}

/** Decodes, quantizes and re-encodes (convenience for callers holding bytes). */
export function quantizeModelBytes(source: Uint8Array, table: CalibrationTable, options: QuantizeOptions): { bytes: Uint8Array; report: QuantizeReport } {
  const model = onnx.ModelProto.decode(source);
  const report = quantizeModel(model, table, options);
  return { bytes: onnx.ModelProto.encode(model).finish(), report };
}

function axis0(): onnxProto.onnx.IAttributeProto {
  return { name: 'axis', i: 0, type: onnx.AttributeProto.AttributeType.INT };
}

function floatsOf(tensor: Tensor): Float32Array {
  if (tensor.dataType !== FLOAT) throw new Error(`${tensor.name} is not FP32`);
  if (tensor.rawData && tensor.rawData.length > 0) {
    const copy = new Uint8Array(tensor.rawData.length);
    copy.set(tensor.rawData);
    return new Float32Array(copy.buffer);
  }
  return Float32Array.from(tensor.floatData ?? []);
}
