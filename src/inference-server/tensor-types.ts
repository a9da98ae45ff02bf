import type { Datatype } from '../protocol/index.js';

/** onnxruntime tensor element types and the Open Inference Protocol datatypes they travel as. */
const ORT_TO_DATATYPE = {
  bool: 'BOOL',
  uint8: 'UINT8',
  int8: 'INT8',
  uint16: 'UINT16',
  int16: 'INT16',
  float16: 'FP16',
  uint32: 'UINT32',
  int32: 'INT32',
  float32: 'FP32',
  uint64: 'UINT64',
  int64: 'INT64',
  float64: 'FP64',
} as const satisfies Record<string, Datatype>;

export type OrtElementType = keyof typeof ORT_TO_DATATYPE;

export function datatypeOf(ortType: string): Datatype | undefined {
  return Object.hasOwn(ORT_TO_DATATYPE, ortType) ? ORT_TO_DATATYPE[ortType as OrtElementType] : undefined;
}

export function ortTypeOf(datatype: Datatype): OrtElementType {
  const entry = Object.entries(ORT_TO_DATATYPE).find(([, d]) => d === datatype);
  if (!entry) throw new Error(`no onnxruntime type for ${datatype}`);
  return entry[0] as OrtElementType;
}

/** Typed-array view of raw little-endian bytes for an onnxruntime tensor of `type`. */
export function typedArrayFor(type: OrtElementType, buffer: ArrayBuffer, byteOffset = 0, byteLength = buffer.byteLength - byteOffset) {
  switch (type) {
    case 'bool':
    case 'uint8':
      return new Uint8Array(buffer, byteOffset, byteLength / 1);
    case 'int8':
      return new Int8Array(buffer, byteOffset, byteLength / 1);
    case 'uint16':
    case 'float16':
      return new Uint16Array(buffer, byteOffset, byteLength / 2);
    case 'int16':
      return new Int16Array(buffer, byteOffset, byteLength / 2);
    case 'uint32':
      return new Uint32Array(buffer, byteOffset, byteLength / 4);
    case 'int32':
      return new Int32Array(buffer, byteOffset, byteLength / 4);
    case 'float32':
      return new Float32Array(buffer, byteOffset, byteLength / 4);
    case 'uint64':
      return new BigUint64Array(buffer, byteOffset, byteLength / 8);
    case 'int64':
      return new BigInt64Array(buffer, byteOffset, byteLength / 8);
    case 'float64':
      return new Float64Array(buffer, byteOffset, byteLength / 8);
  }
}
