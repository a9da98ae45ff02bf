// Original file: proto/grpc_predict_v2.proto


export interface ServerMetadataRequest {
}

export interface ServerMetadataRequest__Output {
}
