// Original file: proto/grpc_predict_v2.proto


export interface SystemSharedMemoryUnregisterRequest {
  'name'?: (string);
}

export interface SystemSharedMemoryUnregisterRequest__Output {
  'name': (string);
}
