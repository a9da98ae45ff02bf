import { DATATYPE_BYTES, type Datatype } from './datatypes.js';
import type { InferTensorContents__Output } from './generated/inference/InferTensorContents.js';

/**
 * The field of `InferTensorContents` that carries each datatype when a tensor travels as typed
 * values instead of raw bytes (Open Inference Protocol: 8- and 16-bit integers widen to 32 bits;
 * FP16 has no typed field and must travel raw).
 */
export const CONTENTS_FIELD = {
  BOOL: 'boolContents',
  UINT8: 'uintContents',
  UINT16: 'uintContents',
  UINT32: 'uintContents',
  UINT64: 'uint64Contents',
  INT8: 'intContents',
  INT16: 'intContents',
  INT32: 'intContents',
  INT64: 'int64Contents',
  FP16: undefined,
  FP32: 'fp32Contents',
  FP64: 'fp64Contents',
} as const satisfies Record<Datatype, keyof InferTensorContents__Output | undefined>;

type ContentsField = NonNullable<(typeof CONTENTS_FIELD)[Datatype]>;

/** The typed fields holding values, so "both raw and typed contents" can be told from an empty message. */
export function typedValueCount(contents: InferTensorContents__Output | null | undefined): number {
  if (!contents) return 0;
  const fields: ContentsField[] = ['boolContents', 'intContents', 'int64Contents', 'uintContents', 'uint64Contents', 'fp32Contents', 'fp64Contents'];
  return fields.reduce((n, field) => n + (contents[field]?.length ?? 0), 0);
}

/** Integer ranges of the narrow types, checked value by value: a 300 sent as UINT8 is an error, not a 44. */
const RANGES: Partial<Record<Datatype, [number, number]>> = {
  UINT8: [0, 0xff],
  UINT16: [0, 0xffff],
  UINT32: [0, 0xffffffff],
  INT8: [-0x80, 0x7f],
  INT16: [-0x8000, 0x7fff],
  INT32: [-0x80000000, 0x7fffffff],
};

/**
 * Typed contents of one tensor to little-endian row-major bytes. Throws (with a message meant for
 * the caller) when the values are of another field, of the wrong count, or out of range.
 */
export function typedContentsToBytes(datatype: Datatype, contents: InferTensorContents__Output, elements: number): Buffer {
  const field = CONTENTS_FIELD[datatype];
  if (!field) throw new Error(`${datatype} tensors have no typed contents field; send them in raw contents`);
  const values = (contents[field] ?? []) as ArrayLike<number | boolean | string>;
  if (values.length !== elements) throw new Error(`${datatype} tensor needs ${elements} values in contents.${field}, got ${values.length}`);
  if (typedValueCount(contents) !== values.length) throw new Error(`${datatype} values belong in contents.${field} alone`);
  const bytes = Buffer.allocUnsafe(elements * DATATYPE_BYTES[datatype]);
  const range = RANGES[datatype];
  if (range) {
    const [lo, hi] = range;
    for (let i = 0; i < elements; i++) {
      const v = values[i] as number;
      if (!Number.isInteger(v) || v < lo || v > hi) throw new Error(`value ${v} at index ${i} is out of range for ${datatype}`);
    }
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  switch (datatype) {
    case 'BOOL':
      for (let i = 0; i < elements; i++) bytes[i] = values[i] ? 1 : 0;
      break;
    case 'UINT8':
    case 'INT8':
      for (let i = 0; i < elements; i++) bytes[i] = (values[i] as number) & 0xff;
      break;
    case 'UINT16':
      for (let i = 0; i < elements; i++) view.setUint16(i * 2, values[i] as number, true);
      break;
    case 'INT16':
      for (let i = 0; i < elements; i++) view.setInt16(i * 2, values[i] as number, true);
      break;
    case 'UINT32':
      for (let i = 0; i < elements; i++) view.setUint32(i * 4, values[i] as number, true);
      break;
    case 'INT32':
      for (let i = 0; i < elements; i++) view.setInt32(i * 4, values[i] as number, true);
      break;
    case 'UINT64':
      for (let i = 0; i < elements; i++) view.setBigUint64(i * 8, BigInt(values[i] as number | string), true);
      break;
    case 'INT64':
      for (let i = 0; i < elements; i++) view.setBigInt64(i * 8, BigInt(values[i] as number | string), true);
      break;
    case 'FP32':
      for (let i = 0; i < elements; i++) view.setFloat32(i * 4, values[i] as number, true);
      break;
    case 'FP64':
      for (let i = 0; i < elements; i++) view.setFloat64(i * 8, values[i] as number, true);
      break;
    case 'FP16':
      throw new Error('unreachable');
  }
  return bytes;
}

/** Elements of a tensor of `shape`; throws on a negative or non-integer dimension. */
export function elementCount(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) {
    if (!Number.isSafeInteger(d) || d < 0) throw new Error(`shape [${shape}] has an invalid dimension`);
    n *= d;
  }
  return n;
}
