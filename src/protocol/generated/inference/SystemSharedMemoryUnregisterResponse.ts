// Original file: proto/grpc_predict_v2.proto


export interface SystemSharedMemoryUnregisterResponse {
}

export interface SystemSharedMemoryUnregisterResponse__Output {
}
