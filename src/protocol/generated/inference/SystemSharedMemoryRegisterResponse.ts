// Original file: proto/grpc_predict_v2.proto


export interface SystemSharedMemoryRegisterResponse {
}

export interface SystemSharedMemoryRegisterResponse__Output {
}
