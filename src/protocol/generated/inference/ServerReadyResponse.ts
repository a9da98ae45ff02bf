// Original file: proto/grpc_predict_v2.proto


export interface ServerReadyResponse {
  'ready'?: (boolean);
}

export interface ServerReadyResponse__Output {
  'ready': (boolean);
}
