import type * as grpc from '@grpc/grpc-js';
import type { MessageTypeDefinition } from '@grpc/proto-loader';

import type { GRPCInferenceServiceClient as _inference_GRPCInferenceServiceClient, GRPCInferenceServiceDefinition as _inference_GRPCInferenceServiceDefinition } from './inference/GRPCInferenceService.js';
import type { InferParameter as _inference_InferParameter, InferParameter__Output as _inference_InferParameter__Output } from './inference/InferParameter.js';
import type { InferTensorContents as _inference_InferTensorContents, InferTensorContents__Output as _inference_InferTensorContents__Output } from './inference/InferTensorContents.js';
import type { ModelInferRequest as _inference_ModelInferRequest, ModelInferRequest__Output as _inference_ModelInferRequest__Output } from './inference/ModelInferRequest.js';
import type { ModelInferResponse as _inference_ModelInferResponse, ModelInferResponse__Output as _inference_ModelInferResponse__Output } from './inference/ModelInferResponse.js';
import type { ModelMetadataRequest as _inference_ModelMetadataRequest, ModelMetadataRequest__Output as _inference_ModelMetadataRequest__Output } from './inference/ModelMetadataRequest.js';
import type { ModelMetadataResponse as _inference_ModelMetadataResponse, ModelMetadataResponse__Output as _inference_ModelMetadataResponse__Output } from './inference/ModelMetadataResponse.js';
import type { ModelReadyRequest as _inference_ModelReadyRequest, ModelReadyRequest__Output as _inference_ModelReadyRequest__Output } from './inference/ModelReadyRequest.js';
import type { ModelReadyResponse as _inference_ModelReadyResponse, ModelReadyResponse__Output as _inference_ModelReadyResponse__Output } from './inference/ModelReadyResponse.js';
import type { ServerLiveRequest as _inference_ServerLiveRequest, ServerLiveRequest__Output as _inference_ServerLiveRequest__Output } from './inference/ServerLiveRequest.js';
import type { ServerLiveResponse as _inference_ServerLiveResponse, ServerLiveResponse__Output as _inference_ServerLiveResponse__Output } from './inference/ServerLiveResponse.js';
import type { ServerMetadataRequest as _inference_ServerMetadataRequest, ServerMetadataRequest__Output as _inference_ServerMetadataRequest__Output } from './inference/ServerMetadataRequest.js';
import type { ServerMetadataResponse as _inference_ServerMetadataResponse, ServerMetadataResponse__Output as _inference_ServerMetadataResponse__Output } from './inference/ServerMetadataResponse.js';
import type { ServerReadyRequest as _inference_ServerReadyRequest, ServerReadyRequest__Output as _inference_ServerReadyRequest__Output } from './inference/ServerReadyRequest.js';
import type { ServerReadyResponse as _inference_ServerReadyResponse, ServerReadyResponse__Output as _inference_ServerReadyResponse__Output } from './inference/ServerReadyResponse.js';
import type { SystemSharedMemoryRegisterRequest as _inference_SystemSharedMemoryRegisterRequest, SystemSharedMemoryRegisterRequest__Output as _inference_SystemSharedMemoryRegisterRequest__Output } from './inference/SystemSharedMemoryRegisterRequest.js';
import type { SystemSharedMemoryRegisterResponse as _inference_SystemSharedMemoryRegisterResponse, SystemSharedMemoryRegisterResponse__Output as _inference_SystemSharedMemoryRegisterResponse__Output } from './inference/SystemSharedMemoryRegisterResponse.js';
import type { SystemSharedMemoryStatusRequest as _inference_SystemSharedMemoryStatusRequest, SystemSharedMemoryStatusRequest__Output as _inference_SystemSharedMemoryStatusRequest__Output } from './inference/SystemSharedMemoryStatusRequest.js';
import type { SystemSharedMemoryStatusResponse as _inference_SystemSharedMemoryStatusResponse, SystemSharedMemoryStatusResponse__Output as _inference_SystemSharedMemoryStatusResponse__Output } from './inference/SystemSharedMemoryStatusResponse.js';
import type { SystemSharedMemoryUnregisterRequest as _inference_SystemSharedMemoryUnregisterRequest, SystemSharedMemoryUnregisterRequest__Output as _inference_SystemSharedMemoryUnregisterRequest__Output } from './inference/SystemSharedMemoryUnregisterRequest.js';
import type { SystemSharedMemoryUnregisterResponse as _inference_SystemSharedMemoryUnregisterResponse, SystemSharedMemoryUnregisterResponse__Output as _inference_SystemSharedMemoryUnregisterResponse__Output } from './inference/SystemSharedMemoryUnregisterResponse.js';

type SubtypeConstructor<Constructor extends new (...args: any) => any, Subtype> = {
  new(...args: ConstructorParameters<Constructor>): Subtype;
};

export interface ProtoGrpcType {
  inference: {
    GRPCInferenceService: SubtypeConstructor<typeof grpc.Client, _inference_GRPCInferenceServiceClient> & { service: _inference_GRPCInferenceServiceDefinition }
    InferParameter: MessageTypeDefinition<_inference_InferParameter, _inference_InferParameter__Output>
    InferTensorContents: MessageTypeDefinition<_inference_InferTensorContents, _inference_InferTensorContents__Output>
    ModelInferRequest: MessageTypeDefinition<_inference_ModelInferRequest, _inference_ModelInferRequest__Output>
    ModelInferResponse: MessageTypeDefinition<_inference_ModelInferResponse, _inference_ModelInferResponse__Output>
    ModelMetadataRequest: MessageTypeDefinition<_inference_ModelMetadataRequest, _inference_ModelMetadataRequest__Output>
    ModelMetadataResponse: MessageTypeDefinition<_inference_ModelMetadataResponse, _inference_ModelMetadataResponse__Output>
    ModelReadyRequest: MessageTypeDefinition<_inference_ModelReadyRequest, _inference_ModelReadyRequest__Output>
    ModelReadyResponse: MessageTypeDefinition<_inference_ModelReadyResponse, _inference_ModelReadyResponse__Output>
    ServerLiveRequest: MessageTypeDefinition<_inference_ServerLiveRequest, _inference_ServerLiveRequest__Output>
    ServerLiveResponse: MessageTypeDefinition<_inference_ServerLiveResponse, _inference_ServerLiveResponse__Output>
    ServerMetadataRequest: MessageTypeDefinition<_inference_ServerMetadataRequest, _inference_ServerMetadataRequest__Output>
    ServerMetadataResponse: MessageTypeDefinition<_inference_ServerMetadataResponse, _inference_ServerMetadataResponse__Output>
    ServerReadyRequest: MessageTypeDefinition<_inference_ServerReadyRequest, _inference_ServerReadyRequest__Output>
    ServerReadyResponse: MessageTypeDefinition<_inference_ServerReadyResponse, _inference_ServerReadyResponse__Output>
    SystemSharedMemoryRegisterRequest: MessageTypeDefinition<_inference_SystemSharedMemoryRegisterRequest, _inference_SystemSharedMemoryRegisterRequest__Output>
    SystemSharedMemoryRegisterResponse: MessageTypeDefinition<_inference_SystemSharedMemoryRegisterResponse, _inference_SystemSharedMemoryRegisterResponse__Output>
    SystemSharedMemoryStatusRequest: MessageTypeDefinition<_inference_SystemSharedMemoryStatusRequest, _inference_SystemSharedMemoryStatusRequest__Output>
    SystemSharedMemoryStatusResponse: MessageTypeDefinition<_inference_SystemSharedMemoryStatusResponse, _inference_SystemSharedMemoryStatusResponse__Output>
    SystemSharedMemoryUnregisterRequest: MessageTypeDefinition<_inference_SystemSharedMemoryUnregisterRequest, _inference_SystemSharedMemoryUnregisterRequest__Output>
    SystemSharedMemoryUnregisterResponse: MessageTypeDefinition<_inference_SystemSharedMemoryUnregisterResponse, _inference_SystemSharedMemoryUnregisterResponse__Output>
  }
}

