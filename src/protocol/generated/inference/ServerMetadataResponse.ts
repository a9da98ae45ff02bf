// Original file: proto/grpc_predict_v2.proto


export interface ServerMetadataResponse {
  'name'?: (string);
  'version'?: (string);
  'extensions'?: (string)[];
}

export interface ServerMetadataResponse__Output {
  'name': (string);
  'version': (string);
  'extensions': (string)[];
}
