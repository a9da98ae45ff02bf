// Original file: proto/grpc_predict_v2.proto


export interface SystemSharedMemoryStatusRequest {
  'name'?: (string);
}

export interface SystemSharedMemoryStatusRequest__Output {
  'name': (string);
}
