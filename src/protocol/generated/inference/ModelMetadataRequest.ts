// Original file: proto/grpc_predict_v2.proto


export interface ModelMetadataRequest {
  'name'?: (string);
  'version'?: (string);
}

export interface ModelMetadataRequest__Output {
  'name': (string);
  'version': (string);
}
