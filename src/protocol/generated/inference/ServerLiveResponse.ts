// Original file: proto/grpc_predict_v2.proto


export interface ServerLiveResponse {
  'live'?: (boolean);
}

export interface ServerLiveResponse__Output {
  'live': (boolean);
}
