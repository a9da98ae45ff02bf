import onnxProto from 'onnx-proto';
import { FAMILIES, type FamilyFacts } from '../../src/models/families.js';

const { onnx } = onnxProto;
const FLOAT = 1;

/** A synthetic mask head: logit = w . x + b per pixel (a 1x1 convolution over the normalised input). */
export interface MaskHead {
  weights: [number, number, number];
  bias: number;
}

export const DEFAULT_HEAD: MaskHead = { weights: [2.5, -1.5, 0.8], bias: 0.3 };

/**
 * The shapes of ISNet's outputs in the export bgcut ships (@imgly/background-removal-data):
 * six masks, then six decoder features. Only the first is the mask; the rest only have to exist
 * with these shapes, as in the real file (preparation prunes them).
 */
function outputShapes(facts: FamilyFacts): number[][] {
  const s = facts.size;
  if (facts.family !== 'isnet') return facts.export.outputs.map(() => [1, 1, s, s]);
  const features = [[64, s / 2], [64, s / 4], [128, s / 8], [256, s / 16], [512, s / 32], [512, s / 64]];
  return [...Array.from({ length: 6 }, () => [1, 1, s, s]), ...features.map(([c, h]) => [1, c!, h!, h!])];
}

const valueInfo = (name: string, shape: number[]) => ({
  name,
  type: { tensorType: { elemType: FLOAT, shape: { dim: shape.map((d) => ({ dimValue: d })) } } },
});

/**
 * An ONNX graph with a family's published signature: its input (name, FP32 [1,3,S,S]), its
 * outputs (names, count, shapes), its opset, and logits or probabilities in the first output,
 * computed by a known head so the mask it gives is known. Side outputs are distinct
 * computations of their own shape, as a real export's are.
 */
export function familyGraph(
  familyName: keyof typeof FAMILIES,
  options: { head?: MaskHead; opset?: number; size?: number; outputs?: number; output?: FamilyFacts['output'] } = {},
): Uint8Array {
  const base = FAMILIES[familyName];
  // `size` and `output` let a test build the graph from facts of its own rather than FAMILIES'.
  const facts: FamilyFacts = { ...base, size: options.size ?? base.size, output: options.output ?? base.output };
  const head = options.head ?? DEFAULT_HEAD;
  const input = facts.export.input;
  const names = facts.export.outputs.slice(0, options.outputs ?? facts.export.outputs.length);
  const shapes = outputShapes(facts).slice(0, names.length);
  const nodes: onnxProto.onnx.INodeProto[] = [];
  const initializer: onnxProto.onnx.ITensorProto[] = [
    { name: 'head_w', dataType: FLOAT, dims: [1, 3, 1, 1], floatData: head.weights },
    { name: 'head_b', dataType: FLOAT, dims: [1], floatData: [head.bias] },
  ];
  const logits = facts.output === 'logits' ? names[0]! : 'logits';
  nodes.push({ opType: 'Conv', input: [input, 'head_w', 'head_b'], output: [logits], name: 'head' });
  if (facts.output === 'probability') nodes.push({ opType: 'Sigmoid', input: [logits], output: [names[0]!], name: 'head_sigmoid' });
  names.slice(1).forEach((name, i) => {
    const [, channels, height] = shapes[i + 1]!;
    const stride = facts.size / height!;
    initializer.push({ name: `side${i}_w`, dataType: FLOAT, dims: [channels!, 3, 1, 1], floatData: Array.from({ length: channels! * 3 }, (_, k) => ((k % 7) - 3) / 10) });
    nodes.push({
      opType: 'Conv',
      input: [input, `side${i}_w`],
      output: [name],
      name: `side${i}`,
      attribute: [{ name: 'strides', ints: [stride, stride], type: onnx.AttributeProto.AttributeType.INTS }],
    });
  });
  return onnx.ModelProto.encode({
    irVersion: 7,
    producerName: 'bgcut-test-synthetic',
    opsetImport: [{ version: options.opset ?? facts.export.opset }],
    graph: {
      name: `synthetic-${facts.family}`,
      node: nodes,
      initializer,
      input: [valueInfo(input, [1, 3, facts.size, facts.size])],
      output: names.map((name, i) => valueInfo(name, shapes[i]!)),
    },
  }).finish();
}

/**
 * The alpha bgcut must make of an image's RGB pixels with this head and normalisation: logit,
 * sigmoid, then the min-max stretch with the "no foreground" rule (MIN_STRETCH_PEAK), in double
 * precision. `sigmoid: false` gives what a pipeline that forgot the sigmoid would make.
 */
export function expectedAlpha(rgb: Uint8Array, normalisation: { mean: number[]; std: number[] }, head: MaskHead = DEFAULT_HEAD, sigmoid = true): Uint8Array {
  const pixels = rgb.length / 3;
  const values = new Float64Array(pixels);
  for (let i = 0; i < pixels; i++) {
    let logit = head.bias;
    for (let c = 0; c < 3; c++) logit += head.weights[c]! * ((rgb[i * 3 + c]! / 255 - normalisation.mean[c]!) / normalisation.std[c]!);
    values[i] = sigmoid ? 1 / (1 + Math.exp(-logit)) : logit;
  }
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of values) {
    lo = Math.min(lo, v);
    hi = Math.max(hi, v);
  }
  if (!(hi - lo > 1e-6) || hi < 0.25) [lo, hi] = [0, 1];
  return Uint8Array.from(values, (v) => Math.min(255, Math.max(0, Math.round(((v - lo) * 255) / (hi - lo)))));
}

/** A test card: red rises left to right, green top to bottom, blue in diagonal bands. */
export function testCard(size: number): Buffer {
  const rgb = Buffer.alloc(size * size * 3);
  for (let y = 0; y < size; y++) {
    for (let x = 0; x < size; x++) {
      const i = (y * size + x) * 3;
      rgb[i] = Math.round((x * 255) / (size - 1));
      rgb[i + 1] = Math.round((y * 255) / (size - 1));
      rgb[i + 2] = ((x + y) >> 4) % 2 ? 200 : 40;
    }
  }
  return rgb;
}
