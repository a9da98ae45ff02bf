/** Tensor datatypes of the protocol, with their element sizes in bytes. */
export const DATATYPE_BYTES = {
  BOOL: 1,
  UINT8: 1,
  INT8: 1,
  UINT16: 2,
  INT16: 2,
  FP16: 2,
  UINT32: 4,
  INT32: 4,
  FP32: 4,
  UINT64: 8,
  INT64: 8,
  FP64: 8,
} as const;

export type Datatype = keyof typeof DATATYPE_BYTES;

export function isDatatype(value: string): value is Datatype {
  return Object.hasOwn(DATATYPE_BYTES, value);
}
