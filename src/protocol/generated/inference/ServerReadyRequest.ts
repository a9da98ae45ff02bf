// Original file: proto/grpc_predict_v2.proto


export interface ServerReadyRequest {
}

export interface ServerReadyRequest__Output {
}
