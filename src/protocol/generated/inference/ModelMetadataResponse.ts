// Original file: proto/grpc_predict_v2.proto

import type { InferParameter as _inference_InferParameter, InferParameter__Output as _inference_InferParameter__Output } from '../inference/InferParameter.js';
import type { Long } from '@grpc/proto-loader';

export interface _inference_ModelMetadataResponse_TensorMetadata {
  'name'?: (string);
  'datatype'?: (string);
  'shape'?: (number | string | Long)[];
}

export interface _inference_ModelMetadataResponse_TensorMetadata__Output {
  'name': (string);
  'datatype': (string);
  'shape': (number)[];
}

export interface ModelMetadataResponse {
  'name'?: (string);
  'versions'?: (string)[];
  'platform'?: (string);
  'inputs'?: (_inference_ModelMetadataResponse_TensorMetadata)[];
  'outputs'?: (_inference_ModelMetadataResponse_TensorMetadata)[];
  'parameters'?: ({[key: string]: _inference_InferParameter});
}

export interface ModelMetadataResponse__Output {
  'name': (string);
  'versions': (string)[];
  'platform': (string);
  'inputs': (_inference_ModelMetadataResponse_TensorMetadata__Output)[];
  'outputs': (_inference_ModelMetadataResponse_TensorMetadata__Output)[];
  'parameters': ({[key: string]: _inference_InferParameter__Output});
}
