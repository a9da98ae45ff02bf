// Original file: proto/grpc_predict_v2.proto


export interface ModelReadyResponse {
  'ready'?: (boolean);
}

export interface ModelReadyResponse__Output {
  'ready': (boolean);
}
