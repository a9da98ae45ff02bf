import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { ProtoGrpcType } from './generated/grpc_predict_v2.js';
import type { GRPCInferenceServiceClient } from './generated/inference/GRPCInferenceService.js';
import type { ModelInferRequest } from './generated/inference/ModelInferRequest.js';
import { inferRequestSerializer } from './infer-request-message.js';
import { modelInferMessages } from './message-counts.js';

export type { ModelInferRequest } from './generated/inference/ModelInferRequest.js';
export type { ModelInferResponse, ModelInferResponse__Output } from './generated/inference/ModelInferResponse.js';
export type { ModelMetadataResponse, ModelMetadataResponse__Output } from './generated/inference/ModelMetadataResponse.js';
export type { InferTensorContents, InferTensorContents__Output } from './generated/inference/InferTensorContents.js';
export type { ModelInferRequest__Output } from './generated/inference/ModelInferRequest.js';
export type { GRPCInferenceServiceClient } from './generated/inference/GRPCInferenceService.js';
export type { GRPCInferenceServiceHandlers } from './generated/inference/GRPCInferenceService.js';

/** The Open Inference Protocol service name, as health checks and reflection know it. */
export const INFERENCE_SERVICE_NAME = 'inference.GRPCInferenceService';
/**
 * Trailer of each ModelInfer answer from bgcut's server: microseconds inside session.run, as in
 * the answer's `session_run_us` parameter, where a client's load balancer (which sees trailers,
 * not messages) can weigh the server by it.
 */
export const RUN_TIME_TRAILER = 'bgcut-session-run-us';
/** Name of the client's and the server's span of a ModelInfer call (OpenTelemetry's `{service}/{method}`). */
export const MODEL_INFER_SPAN = 'inference.GRPCInferenceService/ModelInfer';

/**
 * The .proto file ships with the package (`proto/`); it is loaded at run time, as grpc-node's own
 * health check does, and the committed types in `./generated` are checked against it in CI.
 * These loader options must match the `gen:proto` script's flags.
 */
const PROTO_FILE = findProtoFile();

function findProtoFile(): string {
  // Two levels up from src/protocol when run from source (tests), three from dist/src/protocol.
  for (const up of ['../../', '../../../']) {
    const candidate = fileURLToPath(new URL(`${up}proto/grpc_predict_v2.proto`, import.meta.url));
    if (existsSync(candidate)) return candidate;
  }
  throw new Error('proto/grpc_predict_v2.proto not found beside the package');
}

export const PROTO_LOADER_OPTIONS: protoLoader.Options = {
  keepCase: false,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
};

let cached: ProtoGrpcType | undefined;

export function loadInferenceProto(): ProtoGrpcType {
  if (!cached) {
    const definition = protoLoader.loadSync(PROTO_FILE, PROTO_LOADER_OPTIONS);
    cached = grpc.loadPackageDefinition(definition) as unknown as ProtoGrpcType;
  }
  return cached;
}

export { DATATYPE_BYTES, isDatatype, type Datatype } from './datatypes.js';
export { CONTENTS_FIELD, elementCount, typedContentsToBytes, typedValueCount } from './tensor-contents.js';

/** protobufjs's encoder of ModelInferRequest, as the .proto file defines it (loaded at run time). */
export function modelInferRequestEncoder(): grpc.serialize<ModelInferRequest> {
  return loadInferenceProto().inference.GRPCInferenceService.service.ModelInfer.requestSerialize as grpc.serialize<ModelInferRequest>;
}

/**
 * The inference service's client class with ModelInfer's serializer replaced by
 * inferRequestSerializer: an EncodedInferRequest (a message whose tensor was written into it) is
 * sent as it is; a request object is encoded by protobufjs as before. Every other method is the
 * loaded one.
 */
export function inferenceClientConstructor(): new (address: string, credentials: grpc.ChannelCredentials, options?: grpc.ChannelOptions) => GRPCInferenceServiceClient {
  const Service = loadInferenceProto().inference.GRPCInferenceService;
  const { responseDeserialize } = Service.service.ModelInfer;
  const countedDeserialize = (bytes: Buffer) => {
    modelInferMessages.decoded++;
    return responseDeserialize(bytes);
  };
  const methods = {
    ...Service.service,
    ModelInfer: { ...Service.service.ModelInfer, requestSerialize: inferRequestSerializer(modelInferRequestEncoder()), responseDeserialize: countedDeserialize },
  };
  return grpc.makeGenericClientConstructor(methods, INFERENCE_SERVICE_NAME) as unknown as new (
    address: string,
    credentials: grpc.ChannelCredentials,
    options?: grpc.ChannelOptions,
  ) => GRPCInferenceServiceClient;
}

export { modelInferMessages } from './message-counts.js';
export { inferResponseSerializer, layOutOutputs, markLaidOut, RESPONSE_HEADROOM } from './infer-response-message.js';
export {
  allocateInferMessage,
  EncodedInferRequest,
  inferRequestPrefix,
  inferRequestSerializer,
  startsWithPrefix,
  TENSOR_ALIGNMENT,
  type InferRequestHeader,
} from './infer-request-message.js';
