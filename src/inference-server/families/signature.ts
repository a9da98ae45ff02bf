import onnxProto from 'onnx-proto';
import type { FamilyFacts } from '../../models/families.js';

type Model = onnxProto.onnx.IModelProto;

/** ONNX TensorProto element types by name, for messages. */
const ELEMENT_TYPES: Record<number, string> = { 1: 'FP32', 2: 'UINT8', 3: 'INT8', 4: 'UINT16', 5: 'INT16', 6: 'INT32', 7: 'INT64', 9: 'BOOL', 10: 'FP16', 11: 'FP64', 16: 'BF16' };
const { FLOAT } = onnxProto.onnx.TensorProto.DataType;

export interface TensorSignature {
  name: string;
  datatype: string;
  /** Dimensions; -1 for a free (symbolic or unknown) one. */
  shape: number[];
}

export interface GraphSignature {
  inputs: TensorSignature[];
  outputs: TensorSignature[];
  /** Opset of the default (ai.onnx) domain. */
  opset: number;
}

/**
 * The graph's real inputs (old exports also list their initializers as inputs), its outputs and
 * opset, as the file declares them.
 */
export function graphSignature(model: Model): GraphSignature {
  const graph = model.graph;
  if (!graph) throw new Error('the file has no ONNX graph');
  const initializers = new Set((graph.initializer ?? []).map((t) => t.name));
  const tensor = (v: onnxProto.onnx.IValueInfoProto): TensorSignature => {
    const type = v.type?.tensorType;
    return {
      name: v.name ?? '',
      datatype: ELEMENT_TYPES[type?.elemType ?? 0] ?? `type ${type?.elemType ?? '?'}`,
      shape: (type?.shape?.dim ?? []).map((d) => (d.dimValue !== undefined && d.dimValue !== null && Number(d.dimValue) > 0 ? Number(d.dimValue) : -1)),
    };
  };
  return {
    inputs: (graph.input ?? []).filter((v) => !initializers.has(v.name)).map(tensor),
    outputs: (graph.output ?? []).map(tensor),
    opset: Number(model.opsetImport?.find((o) => !o.domain || o.domain === 'ai.onnx')?.version ?? 0),
  };
}

const show = (t: TensorSignature) => `${t.datatype}[${t.shape.map((d) => (d < 0 ? '?' : d)).join(',')}]`;

/**
 * What differs between a file's graph and its family's signature: one input FP32 [1,3,S,S], a
 * first output FP32 [1,1,S,S] (the mask), and as many outputs as the family's exports have.
 * Free dimensions are accepted (they fit any size). Names are not checked: they vary between
 * exports, and the ones in the file are used.
 */
export function signatureDifferences(signature: GraphSignature, facts: FamilyFacts): string[] {
  const { size, family } = facts;
  const problems: string[] = [];
  const fits = (shape: number[], expected: number[]) => shape.length === expected.length && shape.every((d, i) => d < 0 || d === expected[i]);
  if (signature.inputs.length !== 1) {
    problems.push(`it has ${signature.inputs.length} inputs (${signature.inputs.map((t) => `"${t.name}"`).join(', ')}), ${family} has 1`);
  } else {
    const input = signature.inputs[0]!;
    if (input.datatype !== ELEMENT_TYPES[FLOAT] || !fits(input.shape, [1, 3, size, size])) {
      problems.push(`input "${input.name}" is ${show(input)}, ${family} takes FP32[1,3,${size},${size}]`);
    }
  }
  const { min, max } = facts.outputs;
  if (signature.outputs.length < min || signature.outputs.length > max) {
    problems.push(`it has ${signature.outputs.length} outputs, ${family} has ${min === max ? min : `${min} to ${max}`}`);
  }
  const mask = signature.outputs[0];
  if (mask && (mask.datatype !== ELEMENT_TYPES[FLOAT] || !fits(mask.shape, [1, 1, size, size]))) {
    problems.push(`its first output "${mask.name}" is ${show(mask)}, ${family}'s mask is FP32[1,1,${size},${size}]`);
  }
  return problems;
}
