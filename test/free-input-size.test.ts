import ort from 'onnxruntime-node';
import onnxProto from 'onnx-proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freeInputSize } from '../src/inference-server/free-input-size.js';
import { resolveModelFile } from '../src/inference-server/model-source.js';
import { objectOnTexture } from './helpers/synthetic-image.js';

const { onnx } = onnxProto;
const FLOAT = 1;
const INT64 = 7;

/**
 * A two-level U-Net in miniature, exported the way PyTorch exports `_upsample_like`: each
 * Resize's size is `Concat(Shape(x)[0:2], constant)`, one result joined with its skip tensor
 * (through a Cast pair, like an FP16 graph), the other resized to the input's size.
 */
function tinyUnet(size: number): onnxProto.onnx.IModelProto {
  const i64 = (name: string, values: number[]) => ({ name, dataType: INT64, dims: [values.length], int64Data: values });
  const constant = (output: string, values: number[]) => ({
    opType: 'Constant',
    input: [],
    output: [output],
    name: output,
    attribute: [{ name: 'value', type: onnx.AttributeProto.AttributeType.TENSOR, t: i64('', values) }],
  });
  const ints = (name: string, values: number[]) => ({ name, type: onnx.AttributeProto.AttributeType.INTS, ints: values });
  const int = (name: string, value: number) => ({ name, type: onnx.AttributeProto.AttributeType.INT, i: value });
  const str = (name: string, value: string) => ({ name, type: onnx.AttributeProto.AttributeType.STRING, s: new TextEncoder().encode(value) });
  const resize = (x: string, sizes: string, out: string) => ({
    opType: 'Resize',
    input: [x, '', '', sizes],
    output: [out],
    name: out,
    attribute: [str('mode', 'linear'), str('coordinate_transformation_mode', 'half_pixel')],
  });
  const sizesOf = (x: string, prefix: string, hw: number[]) => [
    { opType: 'Shape', input: [x], output: [`${prefix}/shape`], name: `${prefix}/shape` },
    { opType: 'Slice', input: [`${prefix}/shape`, 'zero', 'two'], output: [`${prefix}/nc`], name: `${prefix}/slice` },
    constant(`${prefix}/hw`, hw),
    { opType: 'Concat', input: [`${prefix}/nc`, `${prefix}/hw`], output: [`${prefix}/sizes`], name: `${prefix}/concat`, attribute: [int('axis', 0)] },
  ];
  const pool = (x: string, out: string) => ({ opType: 'MaxPool', input: [x], output: [out], name: out, attribute: [ints('kernel_shape', [2, 2]), ints('strides', [2, 2]), int('ceil_mode', 1)] });
  const tensor = (name: string, shape: (number | string)[]) => ({
    name,
    type: { tensorType: { elemType: FLOAT, shape: { dim: shape.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })) } } },
  });
  const graph: onnxProto.onnx.IGraphProto = {
    name: 'tiny-unet',
    initializer: [i64('zero', [0]), i64('two', [2])],
    input: [tensor('input', [1, 3, size, size])],
    output: [tensor('output', [1, 1, size, size])],
    node: [
      pool('input', 'p1'),
      pool('p1', 'p2'),
      ...sizesOf('p2', 'up', [size / 2, size / 2]),
      resize('p2', 'up/sizes', 'up'),
      { opType: 'Cast', input: ['up'], output: ['up_cast'], name: 'up_cast', attribute: [int('to', FLOAT)] },
      { opType: 'Concat', input: ['up_cast', 'p1'], output: ['cat'], name: 'cat', attribute: [int('axis', 1)] },
      { opType: 'ReduceMean', input: ['cat'], output: ['side'], name: 'side', attribute: [ints('axes', [1]), int('keepdims', 1)] },
      ...sizesOf('side', 'out', [size, size]),
      resize('side', 'out/sizes', 'side_up'),
      { opType: 'Sigmoid', input: ['side_up'], output: ['output'], name: 'sigmoid' },
    ],
  };
  return { irVersion: 8, opsetImport: [{ domain: '', version: 15 }], graph };
}

const encode = (model: onnxProto.onnx.IModelProto) => onnx.ModelProto.encode(model).finish();

async function run(model: Uint8Array, height: number, width: number): Promise<ort.Tensor> {
  const session = await ort.InferenceSession.create(model);
  try {
    let seed = 7;
    const data = Float32Array.from({ length: 3 * height * width }, () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff) - 0.5);
    const out = await session.run({ input: new ort.Tensor('float32', data, [1, 3, height, width]) });
    return out.output!;
  } finally {
    await session.release();
  }
}

describe('free input size (graph pass)', () => {
  it('leaves the result at the export size bit for bit, and runs at other sizes where the fixed graph fails', async () => {
    const fixed = tinyUnet(64);
    const freed = onnx.ModelProto.decode(encode(fixed));
    expect(freeInputSize(freed.graph!, 'input', { height: 64, width: 64 })).toBe(2);
    freed.graph!.input![0]!.type!.tensorType!.shape!.dim = [{ dimValue: 1 }, { dimValue: 3 }, { dimParam: 'h' }, { dimParam: 'w' }];
    freed.graph!.output![0]!.type!.tensorType!.shape!.dim = [{ dimValue: 1 }, { dimValue: 1 }, { dimParam: 'h' }, { dimParam: 'w' }];
    const freedBytes = encode(freed);

    const a = await run(encode(fixed), 64, 64);
    const b = await run(freedBytes, 64, 64);
    expect(Array.from(b.data as Float32Array)).toEqual(Array.from(a.data as Float32Array));

    const other = await run(freedBytes, 96, 160);
    expect(other.dims).toEqual([1, 1, 96, 160]);
    // The graph as exported cannot: its sizes are still 32 and 64.
    const unfixed = tinyUnet(64);
    unfixed.graph!.input![0]!.type!.tensorType!.shape!.dim = [{ dimValue: 1 }, { dimValue: 3 }, { dimParam: 'h' }, { dimParam: 'w' }];
    unfixed.graph!.output![0]!.type!.tensorType!.shape!.dim = [{ dimValue: 1 }, { dimValue: 1 }, { dimParam: 'h' }, { dimParam: 'w' }];
    await expect(run(encode(unfixed), 96, 160)).rejects.toThrow();
  });

  it('refuses a Resize it cannot tie to a tensor, leaving nothing half rewritten', () => {
    const model = tinyUnet(64);
    // The side output now goes to half the input size: joined with nothing, not the input's size.
    const hw = model.graph!.node!.find((n) => n.output![0] === 'out/hw')!;
    hw.attribute![0]!.t!.int64Data = [32, 32];
    expect(() => freeInputSize(model.graph!, 'input', { height: 64, width: 64 })).toThrow(/joined with nothing/);
  });
});

describe('the prepared ISNet at any size', () => {
  let session: ort.InferenceSession;
  beforeAll(async () => {
    session = await ort.InferenceSession.create(await resolveModelFile('isnet'), { intraOpNumThreads: 1 });
  }, 120_000);
  afterAll(async () => {
    await session?.release();
  });

  it('declares free height and width and returns the mask at the size sent, the object found at each', async () => {
    expect(session.inputNames).toEqual(['image']);
    for (const [height, width] of [
      [320, 320],
      [256, 384],
    ] as const) {
      const image = await objectOnTexture(width, height, 'raw');
      const out = (await session.run({ image: new ort.Tensor('uint8', new Uint8Array(image.rgb), [1, height, width, 3]) })).mask!;
      expect(out.dims).toEqual([1, 1, height, width]);
      const mask = out.data as Uint8Array;
      let inter = 0;
      let union = 0;
      for (let i = 0; i < mask.length; i++) {
        const a = mask[i]! >= 128;
        const b = image.truth[i] === 1;
        if (a && b) inter++;
        if (a || b) union++;
      }
      expect(inter / union).toBeGreaterThan(0.8);
    }
  }, 60_000);
});
