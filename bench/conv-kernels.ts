/**
 * npm run conv-kernels -- [--channels 64] [--size 256] [--runs 9] [--threads 2]
 *
 * One 3x3 convolution (C -> C channels, size x size, batch 1) in each form ISNet's files use,
 * timed side by side (medians, alternating): why the quint8 file shipped in
 * @imgly/background-removal-data is slower than FP32/FP16 while a static QDQ model is faster.
 *  - fp32:            Conv (+Relu, fused by ONNX Runtime into its NCHWc Conv);
 *  - dynamic (u8u8):  the shipped quint8 pattern: DynamicQuantizeLinear of the activation at run
 *                     time, ConvInteger with uint8 weights, Cast to float, two Mul (scales), Add
 *                     (bias), Relu;
 *  - dynamic (u8s8):  the same with int8 weights;
 *  - ConvInteger alone, u8u8 and u8s8 (inputs already 8-bit): the integer kernel by itself;
 *  - static QDQ:      DequantizeLinear -> Conv -> QuantizeLinear with int8 per-channel weights, as
 *                     isnet-int8 is made; ONNX Runtime fuses it into one QLinearConv.
 */
import ort from 'onnxruntime-node';
import os from 'node:os';
import { parseArgs } from 'node:util';
import onnxProto from 'onnx-proto';

const { onnx } = onnxProto;
const { values } = parseArgs({
  options: {
    channels: { type: 'string', default: '64' },
    size: { type: 'string', default: '256' },
    runs: { type: 'string', default: '9' },
    threads: { type: 'string', default: String(os.availableParallelism()) },
  },
});
const C = Number(values.channels);
const S = Number(values.size);
const FLOAT = 1;
const UINT8 = 2;
const INT8 = 3;
const INT32 = 6;

type Node = onnxProto.onnx.INodeProto;
type Tensor = onnxProto.onnx.ITensorProto;
const attr = {
  ints: (name: string, v: number[]) => ({ name, ints: v, type: onnx.AttributeProto.AttributeType.INTS }),
  int: (name: string, v: number) => ({ name, i: v, type: onnx.AttributeProto.AttributeType.INT }),
};
const convAttrs = [attr.ints('kernel_shape', [3, 3]), attr.ints('pads', [1, 1, 1, 1])];
let seed = 1;
const random = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff) * 2 - 1;
const tensor = (name: string, dataType: number, dims: number[], values: number[]): Tensor => {
  const n = dims.reduce((a, b) => a * b, 1);
  const array =
    dataType === FLOAT ? Float32Array.from({ length: n }, (_, i) => values[i % values.length]!) :
    dataType === INT32 ? Int32Array.from({ length: n }, (_, i) => values[i % values.length]!) :
    dataType === INT8 ? Int8Array.from({ length: n }, (_, i) => values[i % values.length]!) :
    Uint8Array.from({ length: n }, (_, i) => values[i % values.length]!);
  return { name, dataType, dims, rawData: new Uint8Array(array.buffer) };
};
const weights = Array.from({ length: C * C * 9 }, () => random() * 0.05);

function model(input: number, nodes: Node[], initializers: Tensor[], outputType: number): Uint8Array {
  const dims = (d: number[]) => ({ dim: d.map((v) => ({ dimValue: v })) });
  return onnx.ModelProto.encode({
    irVersion: 8,
    opsetImport: [{ domain: '', version: 17 }],
    graph: {
      name: 'conv',
      node: nodes,
      initializer: initializers,
      input: [{ name: 'x', type: { tensorType: { elemType: input, shape: dims([1, C, S, S]) } } }],
      output: [{ name: 'y', type: { tensorType: { elemType: outputType, shape: dims([1, C, S, S]) } } }],
    },
  }).finish();
}

const variants: Record<string, { bytes: Uint8Array; input: 'float' | 'uint8' }> = {
  fp32: {
    input: 'float',
    bytes: model(FLOAT, [{ opType: 'Conv', input: ['x', 'w', 'b'], output: ['c'], attribute: convAttrs }, { opType: 'Relu', input: ['c'], output: ['y'] }], [tensor('w', FLOAT, [C, C, 3, 3], weights), tensor('b', FLOAT, [C], [0.01])], FLOAT),
  },
};
for (const [label, wType, wValues] of [
  ['u8u8', UINT8, weights.map((w) => Math.round(w / 0.0004) + 128)],
  ['u8s8', INT8, weights.map((w) => Math.round(w / 0.0004))],
] as const) {
  const zp = wType === UINT8 ? 128 : 0;
  variants[`dynamic (${label})`] = {
    input: 'float',
    bytes: model(
      FLOAT,
      [
        { opType: 'DynamicQuantizeLinear', input: ['x'], output: ['xq', 'xs', 'xz'] },
        { opType: 'ConvInteger', input: ['xq', 'w', 'xz', 'wz'], output: ['ci'], attribute: convAttrs },
        { opType: 'Cast', input: ['ci'], output: ['cf'], attribute: [attr.int('to', FLOAT)] },
        { opType: 'Mul', input: ['cf', 'xs'], output: ['m1'] },
        { opType: 'Mul', input: ['m1', 'ws'], output: ['m2'] },
        { opType: 'Add', input: ['m2', 'b'], output: ['a'] },
        { opType: 'Relu', input: ['a'], output: ['y'] },
      ],
      [tensor('w', wType, [C, C, 3, 3], wValues), tensor('wz', wType, [], [zp]), tensor('ws', FLOAT, [], [0.0004]), tensor('b', FLOAT, [1, C, 1, 1], [0.01])],
      FLOAT,
    ),
  };
  variants[`ConvInteger alone (${label})`] = {
    input: 'uint8',
    bytes: model(UINT8, [{ opType: 'ConvInteger', input: ['x', 'w', 'xz', 'wz'], output: ['y'], attribute: convAttrs }], [tensor('w', wType, [C, C, 3, 3], wValues), tensor('xz', UINT8, [], [0]), tensor('wz', wType, [], [zp])], INT32),
  };
}
{
  const scales = Array.from({ length: C }, () => 0.0004);
  variants['static QDQ (QLinearConv)'] = {
    input: 'uint8',
    bytes: model(
      UINT8,
      [
        { opType: 'DequantizeLinear', input: ['x', 'xs', 'xz'], output: ['xd'] },
        { opType: 'DequantizeLinear', input: ['w', 'ws', 'wz'], output: ['wd'], attribute: [attr.int('axis', 0)] },
        { opType: 'DequantizeLinear', input: ['b', 'bs', 'bz'], output: ['bd'], attribute: [attr.int('axis', 0)] },
        { opType: 'Conv', input: ['xd', 'wd', 'bd'], output: ['c'], attribute: convAttrs },
        { opType: 'QuantizeLinear', input: ['c', 'ys', 'yz'], output: ['y'] },
      ],
      [
        tensor('xs', FLOAT, [], [0.02]),
        tensor('xz', UINT8, [], [0]),
        tensor('w', INT8, [C, C, 3, 3], weights.map((w) => Math.round(w / 0.0004))),
        tensor('ws', FLOAT, [C], scales),
        tensor('wz', INT8, [C], [0]),
        tensor('b', INT32, [C], [1250]),
        tensor('bs', FLOAT, [C], scales.map((s) => s * 0.02)),
        tensor('bz', INT32, [C], [0]),
        tensor('ys', FLOAT, [], [0.05]),
        tensor('yz', UINT8, [], [0]),
      ],
      UINT8,
    ),
  };
}

const sessions = new Map<string, { session: ort.InferenceSession; feed: Record<string, ort.Tensor> }>();
for (const [name, v] of Object.entries(variants)) {
  try {
    const session = await ort.InferenceSession.create(v.bytes, { intraOpNumThreads: Number(values.threads), interOpNumThreads: 1, executionMode: 'sequential', graphOptimizationLevel: 'all' });
    const n = C * S * S;
    const x = v.input === 'float' ? new ort.Tensor('float32', Float32Array.from({ length: n }, (_, i) => ((i * 7919) % 255) / 255), [1, C, S, S]) : new ort.Tensor('uint8', Uint8Array.from({ length: n }, (_, i) => (i * 7919) % 255), [1, C, S, S]);
    sessions.set(name, { session, feed: { x } });
  } catch (error) {
    console.log(`${name}: ONNX Runtime refused it (${(error as Error).message.split('\n')[0]})`);
  }
}
const times = new Map<string, number[]>([...sessions.keys()].map((k) => [k, []]));
for (const { session, feed } of sessions.values()) await session.run(feed);
for (let r = 0; r < Number(values.runs); r++) {
  for (const [name, { session, feed }] of sessions) {
    const started = performance.now();
    await session.run(feed);
    times.get(name)!.push(performance.now() - started);
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const base = median(times.get('fp32')!);
console.log(`3x3 conv ${C} -> ${C} channels at ${S}x${S}, ${values.threads} threads, medians of ${values.runs} alternating runs`);
console.log('| form | ms | ratio to fp32 |\n|---|---|---|');
for (const [name, xs] of times) console.log(`| ${name} | ${median(xs).toFixed(2)} | ${(median(xs) / base).toFixed(2)} |`);
