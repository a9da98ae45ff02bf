// Original file: proto/grpc_predict_v2.proto


export interface ServerLiveRequest {
}

export interface ServerLiveRequest__Output {
}
