// Original file: proto/grpc_predict_v2.proto

import type { Long } from '@grpc/proto-loader';

export interface InferTensorContents {
  'boolContents'?: (boolean)[];
  'intContents'?: (number)[];
  'int64Contents'?: (number | string | Long)[];
  'uintContents'?: (number)[];
  'uint64Contents'?: (number | string | Long)[];
  'fp32Contents'?: (number | string)[];
  'fp64Contents'?: (number | string)[];
  'bytesContents'?: (Buffer | Uint8Array | string)[];
}

export interface InferTensorContents__Output {
  'boolContents': (boolean)[];
  'intContents': (number)[];
  'int64Contents': (number)[];
  'uintContents': (number)[];
  'uint64Contents': (number)[];
  'fp32Contents': (number)[];
  'fp64Contents': (number)[];
  'bytesContents': (Buffer)[];
}
