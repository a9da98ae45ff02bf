import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import onnxProto from 'onnx-proto';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAMILIES } from '../src/models/families.js';
import { resolveFamilyModel, WrongGraphError } from '../src/inference-server/families/family-model.js';
import { graphSignature, signatureDifferences } from '../src/inference-server/families/signature.js';
import { prepareModel } from '../src/inference-server/prepare-model.js';
import { familyGraph } from './helpers/family-graphs.js';

const { onnx } = onnxProto;
const FLOAT = 1;
const valueInfo = (name: string, shape: number[]) => ({ name, type: { tensorType: { elemType: FLOAT, shape: { dim: shape.map((d) => ({ dimValue: d })) } } } });

/** x [1,3,S,S] -> y = x[:, 0] (a 1x1 convolution that keeps the model's first channel), plus a side output z. */
function firstChannelGraph(opset: number, size: number): Uint8Array {
  return onnx.ModelProto.encode({
    irVersion: 8,
    opsetImport: [{ version: opset }],
    graph: {
      name: 'first-channel',
      node: [
        { opType: 'Conv', input: ['x', 'w'], output: ['y'], name: 'pick' },
        { opType: 'Neg', input: ['x'], output: ['z'], name: 'side' },
      ],
      initializer: [{ name: 'w', dataType: FLOAT, dims: [1, 3, 1, 1], floatData: [1, 0, 0] }],
      input: [valueInfo('x', [1, 3, size, size])],
      output: [valueInfo('y', [1, 1, size, size]), valueInfo('z', [1, 3, size, size])],
    },
  }).finish();
}

describe('prepareModel for families', () => {
  const size = 4;
  const mean: [number, number, number] = [0.1, 0.2, 0.3];
  const std: [number, number, number] = [0.5, 0.25, 2];
  // RGB pixels, NHWC: blue (the model's first channel once reordered to BGR) varies most.
  const pixels = Uint8Array.from({ length: size * size * 3 }, (_, i) => (i % 3 === 2 ? (i * 37) % 256 : (i * 11) % 64));

  for (const opset of [13, 18]) {
    it(`opset ${opset}: BGR order, std and sigmoid run inside the graph; the mask is the only output`, async () => {
      const { bytes, info } = prepareModel(firstChannelGraph(opset, size), {
        sourceInput: 'x',
        sourceOutput: 'y',
        mean,
        std,
        channelOrder: 'BGR',
        sigmoid: true,
        maskBits: 8,
        inputName: 'image',
        outputName: 'mask',
        minStretchPeak: 0.25,
        freeBatch: false,
      });
      expect(info.input.shape).toEqual([1, size, size, 3]);
      const session = await ort.InferenceSession.create(bytes);
      expect(session.inputNames).toEqual(['image']);
      expect(session.outputNames).toEqual(['mask']);
      const result = await session.run({ image: new ort.Tensor('uint8', pixels, [1, size, size, 3]) });
      const mask = result.mask!.data as Uint8Array;
      // Model channel 0 is blue; (b / 255 - mean[0]) / std[0], sigmoid, stretched to 0..255.
      const p = Array.from({ length: size * size }, (_, i) => 1 / (1 + Math.exp(-((pixels[i * 3 + 2]! / 255 - mean[0]) / std[0]))));
      const lo = Math.min(...p);
      const hi = Math.max(...p);
      const expected = p.map((v) => Math.round(((v - lo) * 255) / (hi - lo)));
      expect(Array.from(mask).map((v, i) => Math.abs(v - expected[i]!))).toSatisfy((d: number[]) => Math.max(...d) <= 1);
      expect(Math.min(...mask)).toBe(0);
      expect(Math.max(...mask)).toBe(255);
    });
  }

  it('refuses opsets before 11 (Clip takes no bounds as inputs there)', () => {
    expect(() => prepareModel(firstChannelGraph(10, size), { sourceInput: 'x', sourceOutput: 'y', mean, maskBits: 8, inputName: 'image', outputName: 'mask', minStretchPeak: 0.25 })).toThrow(/opset 10 is not supported/);
  });
});

describe('family signatures', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-signature-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('each synthetic graph has its family\'s signature (so the HTTP tests run what a real file looks like)', () => {
    for (const facts of Object.values(FAMILIES)) {
      const signature = graphSignature(onnx.ModelProto.decode(familyGraph(facts.family)));
      expect(signatureDifferences(signature, facts), facts.family).toEqual([]);
      expect(signature.inputs.map((t) => t.name)).toEqual([facts.export.input]);
      expect(signature.outputs.map((t) => t.name)).toEqual(facts.export.outputs);
      expect(signature.opset).toBe(facts.export.opset);
    }
  });

  it('a file whose graph is another family\'s is refused, saying what differs', async () => {
    const file = path.join(dir, 'birefnet-general.onnx');
    await writeFile(file, familyGraph('u2net'));
    const refusal = await resolveFamilyModel({ file, family: 'birefnet-general' }, { cacheDir: path.join(dir, 'cache') }).catch((e: unknown) => e);
    expect(refusal).toBeInstanceOf(WrongGraphError);
    expect((refusal as Error).message).toContain(`${file} is not a birefnet-general (birefnet) graph`);
    expect((refusal as Error).message).toContain('input "input.1" is FP32[1,3,320,320], birefnet takes FP32[1,3,1024,1024]');
    expect((refusal as Error).message).toContain('its first output "1959" is FP32[1,1,320,320], birefnet\'s mask is FP32[1,1,1024,1024]');
  });

  it('a file with fewer outputs than its family\'s exports is refused, saying so', async () => {
    const file = path.join(dir, 'u2net.onnx');
    await writeFile(file, familyGraph('u2net', { outputs: 1 }));
    await expect(resolveFamilyModel({ file, family: 'u2net' }, { cacheDir: path.join(dir, 'cache') })).rejects.toThrow(`${file} is not a u2net (u2net) graph: it has 1 outputs, u2net has 7`);
  });

  it('a graph with a different input datatype or a second input is refused', () => {
    const facts = FAMILIES.ben2;
    const signature = graphSignature(onnx.ModelProto.decode(familyGraph('ben2')));
    expect(signatureDifferences({ ...signature, inputs: [{ ...signature.inputs[0]!, datatype: 'FP16' }] }, facts)).toEqual(['input "input" is FP16[1,3,1024,1024], ben2 takes FP32[1,3,1024,1024]']);
    expect(signatureDifferences({ ...signature, inputs: [...signature.inputs, { name: 'mask_hint', datatype: 'FP32', shape: [1, 1, 1024, 1024] }] }, facts)).toEqual([
      'it has 2 inputs ("input", "mask_hint"), ben2 has 1',
    ]);
  });

  it('a file that is not ONNX at all is refused as such', async () => {
    const file = path.join(dir, 'not-a-model.onnx');
    await writeFile(file, 'this is text, not a protobuf model\n'.repeat(4));
    await expect(resolveFamilyModel({ file, family: 'u2net' }, { cacheDir: path.join(dir, 'cache') })).rejects.toThrow(`${file} is not an ONNX model`);
  });
});
