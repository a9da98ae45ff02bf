// Original file: proto/grpc_predict_v2.proto


export interface ModelReadyRequest {
  'name'?: (string);
  'version'?: (string);
}

export interface ModelReadyRequest__Output {
  'name': (string);
  'version': (string);
}
