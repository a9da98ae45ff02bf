// Original file: proto/grpc_predict_v2.proto

import type { Long } from '@grpc/proto-loader';

export interface InferParameter {
  'boolParam'?: (boolean);
  'int64Param'?: (number | string | Long);
  'stringParam'?: (string);
  'parameterChoice'?: "boolParam"|"int64Param"|"stringParam";
}

export interface InferParameter__Output {
  'boolParam'?: (boolean);
  'int64Param'?: (number);
  'stringParam'?: (string);
  'parameterChoice'?: "boolParam"|"int64Param"|"stringParam";
}
