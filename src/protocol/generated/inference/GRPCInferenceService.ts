// Original file: proto/grpc_predict_v2.proto

import type * as grpc from '@grpc/grpc-js'
import type { MethodDefinition } from '@grpc/proto-loader'
import type { ModelInferRequest as _inference_ModelInferRequest, ModelInferRequest__Output as _inference_ModelInferRequest__Output } from '../inference/ModelInferRequest.js';
import type { ModelInferResponse as _inference_ModelInferResponse, ModelInferResponse__Output as _inference_ModelInferResponse__Output } from '../inference/ModelInferResponse.js';
import type { ModelMetadataRequest as _inference_ModelMetadataRequest, ModelMetadataRequest__Output as _inference_ModelMetadataRequest__Output } from '../inference/ModelMetadataRequest.js';
import type { ModelMetadataResponse as _inference_ModelMetadataResponse, ModelMetadataResponse__Output as _inference_ModelMetadataResponse__Output } from '../inference/ModelMetadataResponse.js';
import type { ModelReadyRequest as _inference_ModelReadyRequest, ModelReadyRequest__Output as _inference_ModelReadyRequest__Output } from '../inference/ModelReadyRequest.js';
import type { ModelReadyResponse as _inference_ModelReadyResponse, ModelReadyResponse__Output as _inference_ModelReadyResponse__Output } from '../inference/ModelReadyResponse.js';
import type { ServerLiveRequest as _inference_ServerLiveRequest, ServerLiveRequest__Output as _inference_ServerLiveRequest__Output } from '../inference/ServerLiveRequest.js';
import type { ServerLiveResponse as _inference_ServerLiveResponse, ServerLiveResponse__Output as _inference_ServerLiveResponse__Output } from '../inference/ServerLiveResponse.js';
import type { ServerMetadataRequest as _inference_ServerMetadataRequest, ServerMetadataRequest__Output as _inference_ServerMetadataRequest__Output } from '../inference/ServerMetadataRequest.js';
import type { ServerMetadataResponse as _inference_ServerMetadataResponse, ServerMetadataResponse__Output as _inference_ServerMetadataResponse__Output } from '../inference/ServerMetadataResponse.js';
import type { ServerReadyRequest as _inference_ServerReadyRequest, ServerReadyRequest__Output as _inference_ServerReadyRequest__Output } from '../inference/ServerReadyRequest.js';
import type { ServerReadyResponse as _inference_ServerReadyResponse, ServerReadyResponse__Output as _inference_ServerReadyResponse__Output } from '../inference/ServerReadyResponse.js';
import type { SystemSharedMemoryRegisterRequest as _inference_SystemSharedMemoryRegisterRequest, SystemSharedMemoryRegisterRequest__Output as _inference_SystemSharedMemoryRegisterRequest__Output } from '../inference/SystemSharedMemoryRegisterRequest.js';
import type { SystemSharedMemoryRegisterResponse as _inference_SystemSharedMemoryRegisterResponse, SystemSharedMemoryRegisterResponse__Output as _inference_SystemSharedMemoryRegisterResponse__Output } from '../inference/SystemSharedMemoryRegisterResponse.js';
import type { SystemSharedMemoryStatusRequest as _inference_SystemSharedMemoryStatusRequest, SystemSharedMemoryStatusRequest__Output as _inference_SystemSharedMemoryStatusRequest__Output } from '../inference/SystemSharedMemoryStatusRequest.js';
import type { SystemSharedMemoryStatusResponse as _inference_SystemSharedMemoryStatusResponse, SystemSharedMemoryStatusResponse__Output as _inference_SystemSharedMemoryStatusResponse__Output } from '../inference/SystemSharedMemoryStatusResponse.js';
import type { SystemSharedMemoryUnregisterRequest as _inference_SystemSharedMemoryUnregisterRequest, SystemSharedMemoryUnregisterRequest__Output as _inference_SystemSharedMemoryUnregisterRequest__Output } from '../inference/SystemSharedMemoryUnregisterRequest.js';
import type { SystemSharedMemoryUnregisterResponse as _inference_SystemSharedMemoryUnregisterResponse, SystemSharedMemoryUnregisterResponse__Output as _inference_SystemSharedMemoryUnregisterResponse__Output } from '../inference/SystemSharedMemoryUnregisterResponse.js';

export interface GRPCInferenceServiceClient extends grpc.Client {
  ModelInfer(argument: _inference_ModelInferRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_ModelInferResponse__Output>): grpc.ClientUnaryCall;
  ModelInfer(argument: _inference_ModelInferRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_inference_ModelInferResponse__Output>): grpc.ClientUnaryCall;
  ModelInfer(argument: _inference_ModelInferRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_ModelInferResponse__Output>): grpc.ClientUnaryCall;
  ModelInfer(argument: _inference_ModelInferRequest, callback: grpc.requestCallback<_inference_ModelInferResponse__Output>): grpc.ClientUnaryCall;
  modelInfer(argument: _inference_ModelInferRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_ModelInferResponse__Output>): grpc.ClientUnaryCall;
  modelInfer(argument: _inference_ModelInferRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_inference_ModelInferResponse__Output>): grpc.ClientUnaryCall;
  modelInfer(argument: _inference_ModelInferRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_ModelInferResponse__Output>): grpc.ClientUnaryCall;
  modelInfer(argument: _inference_ModelInferRequest, callback: grpc.requestCallback<_inference_ModelInferResponse__Output>): grpc.ClientUnaryCall;
  
  ModelMetadata(argument: _inference_ModelMetadataRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_ModelMetadataResponse__Output>): grpc.ClientUnaryCall;
  ModelMetadata(argument: _inference_ModelMetadataRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_inference_ModelMetadataResponse__Output>): grpc.ClientUnaryCall;
  ModelMetadata(argument: _inference_ModelMetadataRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_ModelMetadataResponse__Output>): grpc.ClientUnaryCall;
  ModelMetadata(argument: _inference_ModelMetadataRequest, callback: grpc.requestCallback<_inference_ModelMetadataResponse__Output>): grpc.ClientUnaryCall;
  modelMetadata(argument: _inference_ModelMetadataRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_ModelMetadataResponse__Output>): grpc.ClientUnaryCall;
  modelMetadata(argument: _inference_ModelMetadataRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_inference_ModelMetadataResponse__Output>): grpc.ClientUnaryCall;
  modelMetadata(argument: _inference_ModelMetadataRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_ModelMetadataResponse__Output>): grpc.ClientUnaryCall;
  modelMetadata(argument: _inference_ModelMetadataRequest, callback: grpc.requestCallback<_inference_ModelMetadataResponse__Output>): grpc.ClientUnaryCall;
  
  ModelReady(argument: _inference_ModelReadyRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_ModelReadyResponse__Output>): grpc.ClientUnaryCall;
  ModelReady(argument: _inference_ModelReadyRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_inference_ModelReadyResponse__Output>): grpc.ClientUnaryCall;
  ModelReady(argument: _inference_ModelReadyRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_ModelReadyResponse__Output>): grpc.ClientUnaryCall;
  ModelReady(argument: _inference_ModelReadyRequest, callback: grpc.requestCallback<_inference_ModelReadyResponse__Output>): grpc.ClientUnaryCall;
  modelReady(argument: _inference_ModelReadyRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_ModelReadyResponse__Output>): grpc.ClientUnaryCall;
  modelReady(argument: _inference_ModelReadyRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_inference_ModelReadyResponse__Output>): grpc.ClientUnaryCall;
  modelReady(argument: _inference_ModelReadyRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_ModelReadyResponse__Output>): grpc.ClientUnaryCall;
  modelReady(argument: _inference_ModelReadyRequest, callback: grpc.requestCallback<_inference_ModelReadyResponse__Output>): grpc.ClientUnaryCall;
  
  ServerLive(argument: _inference_ServerLiveRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_ServerLiveResponse__Output>): grpc.ClientUnaryCall;
  ServerLive(argument: _inference_ServerLiveRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_inference_ServerLiveResponse__Output>): grpc.ClientUnaryCall;
  ServerLive(argument: _inference_ServerLiveRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_ServerLiveResponse__Output>): grpc.ClientUnaryCall;
  ServerLive(argument: _inference_ServerLiveRequest, callback: grpc.requestCallback<_inference_ServerLiveResponse__Output>): grpc.ClientUnaryCall;
  serverLive(argument: _inference_ServerLiveRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_ServerLiveResponse__Output>): grpc.ClientUnaryCall;
  serverLive(argument: _inference_ServerLiveRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_inference_ServerLiveResponse__Output>): grpc.ClientUnaryCall;
  serverLive(argument: _inference_ServerLiveRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_ServerLiveResponse__Output>): grpc.ClientUnaryCall;
  serverLive(argument: _inference_ServerLiveRequest, callback: grpc.requestCallback<_inference_ServerLiveResponse__Output>): grpc.ClientUnaryCall;
  
  ServerMetadata(argument: _inference_ServerMetadataRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_ServerMetadataResponse__Output>): grpc.ClientUnaryCall;
  ServerMetadata(argument: _inference_ServerMetadataRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_inference_ServerMetadataResponse__Output>): grpc.ClientUnaryCall;
  ServerMetadata(argument: _inference_ServerMetadataRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_ServerMetadataResponse__Output>): grpc.ClientUnaryCall;
  ServerMetadata(argument: _inference_ServerMetadataRequest, callback: grpc.requestCallback<_inference_ServerMetadataResponse__Output>): grpc.ClientUnaryCall;
  serverMetadata(argument: _inference_ServerMetadataRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_ServerMetadataResponse__Output>): grpc.ClientUnaryCall;
  serverMetadata(argument: _inference_ServerMetadataRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_inference_ServerMetadataResponse__Output>): grpc.ClientUnaryCall;
  serverMetadata(argument: _inference_ServerMetadataRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_ServerMetadataResponse__Output>): grpc.ClientUnaryCall;
  serverMetadata(argument: _inference_ServerMetadataRequest, callback: grpc.requestCallback<_inference_ServerMetadataResponse__Output>): grpc.ClientUnaryCall;
  
  ServerReady(argument: _inference_ServerReadyRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_ServerReadyResponse__Output>): grpc.ClientUnaryCall;
  ServerReady(argument: _inference_ServerReadyRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_inference_ServerReadyResponse__Output>): grpc.ClientUnaryCall;
  ServerReady(argument: _inference_ServerReadyRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_ServerReadyResponse__Output>): grpc.ClientUnaryCall;
  ServerReady(argument: _inference_ServerReadyRequest, callback: grpc.requestCallback<_inference_ServerReadyResponse__Output>): grpc.ClientUnaryCall;
  serverReady(argument: _inference_ServerReadyRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_ServerReadyResponse__Output>): grpc.ClientUnaryCall;
  serverReady(argument: _inference_ServerReadyRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_inference_ServerReadyResponse__Output>): grpc.ClientUnaryCall;
  serverReady(argument: _inference_ServerReadyRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_ServerReadyResponse__Output>): grpc.ClientUnaryCall;
  serverReady(argument: _inference_ServerReadyRequest, callback: grpc.requestCallback<_inference_ServerReadyResponse__Output>): grpc.ClientUnaryCall;
  
  SystemSharedMemoryRegister(argument: _inference_SystemSharedMemoryRegisterRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_SystemSharedMemoryRegisterResponse__Output>): grpc.ClientUnaryCall;
  SystemSharedMemoryRegister(argument: _inference_SystemSharedMemoryRegisterRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_inference_SystemSharedMemoryRegisterResponse__Output>): grpc.ClientUnaryCall;
  SystemSharedMemoryRegister(argument: _inference_SystemSharedMemoryRegisterRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_SystemSharedMemoryRegisterResponse__Output>): grpc.ClientUnaryCall;
  SystemSharedMemoryRegister(argument: _inference_SystemSharedMemoryRegisterRequest, callback: grpc.requestCallback<_inference_SystemSharedMemoryRegisterResponse__Output>): grpc.ClientUnaryCall;
  systemSharedMemoryRegister(argument: _inference_SystemSharedMemoryRegisterRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_SystemSharedMemoryRegisterResponse__Output>): grpc.ClientUnaryCall;
  systemSharedMemoryRegister(argument: _inference_SystemSharedMemoryRegisterRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_inference_SystemSharedMemoryRegisterResponse__Output>): grpc.ClientUnaryCall;
  systemSharedMemoryRegister(argument: _inference_SystemSharedMemoryRegisterRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_SystemSharedMemoryRegisterResponse__Output>): grpc.ClientUnaryCall;
  systemSharedMemoryRegister(argument: _inference_SystemSharedMemoryRegisterRequest, callback: grpc.requestCallback<_inference_SystemSharedMemoryRegisterResponse__Output>): grpc.ClientUnaryCall;
  
  SystemSharedMemoryStatus(argument: _inference_SystemSharedMemoryStatusRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_SystemSharedMemoryStatusResponse__Output>): grpc.ClientUnaryCall;
  SystemSharedMemoryStatus(argument: _inference_SystemSharedMemoryStatusRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_inference_SystemSharedMemoryStatusResponse__Output>): grpc.ClientUnaryCall;
  SystemSharedMemoryStatus(argument: _inference_SystemSharedMemoryStatusRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_SystemSharedMemoryStatusResponse__Output>): grpc.ClientUnaryCall;
  SystemSharedMemoryStatus(argument: _inference_SystemSharedMemoryStatusRequest, callback: grpc.requestCallback<_inference_SystemSharedMemoryStatusResponse__Output>): grpc.ClientUnaryCall;
  systemSharedMemoryStatus(argument: _inference_SystemSharedMemoryStatusRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_SystemSharedMemoryStatusResponse__Output>): grpc.ClientUnaryCall;
  systemSharedMemoryStatus(argument: _inference_SystemSharedMemoryStatusRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_inference_SystemSharedMemoryStatusResponse__Output>): grpc.ClientUnaryCall;
  systemSharedMemoryStatus(argument: _inference_SystemSharedMemoryStatusRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_SystemSharedMemoryStatusResponse__Output>): grpc.ClientUnaryCall;
  systemSharedMemoryStatus(argument: _inference_SystemSharedMemoryStatusRequest, callback: grpc.requestCallback<_inference_SystemSharedMemoryStatusResponse__Output>): grpc.ClientUnaryCall;
  
  SystemSharedMemoryUnregister(argument: _inference_SystemSharedMemoryUnregisterRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_SystemSharedMemoryUnregisterResponse__Output>): grpc.ClientUnaryCall;
  SystemSharedMemoryUnregister(argument: _inference_SystemSharedMemoryUnregisterRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_inference_SystemSharedMemoryUnregisterResponse__Output>): grpc.ClientUnaryCall;
  SystemSharedMemoryUnregister(argument: _inference_SystemSharedMemoryUnregisterRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_SystemSharedMemoryUnregisterResponse__Output>): grpc.ClientUnaryCall;
  SystemSharedMemoryUnregister(argument: _inference_SystemSharedMemoryUnregisterRequest, callback: grpc.requestCallback<_inference_SystemSharedMemoryUnregisterResponse__Output>): grpc.ClientUnaryCall;
  systemSharedMemoryUnregister(argument: _inference_SystemSharedMemoryUnregisterRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_SystemSharedMemoryUnregisterResponse__Output>): grpc.ClientUnaryCall;
  systemSharedMemoryUnregister(argument: _inference_SystemSharedMemoryUnregisterRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_inference_SystemSharedMemoryUnregisterResponse__Output>): grpc.ClientUnaryCall;
  systemSharedMemoryUnregister(argument: _inference_SystemSharedMemoryUnregisterRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_inference_SystemSharedMemoryUnregisterResponse__Output>): grpc.ClientUnaryCall;
  systemSharedMemoryUnregister(argument: _inference_SystemSharedMemoryUnregisterRequest, callback: grpc.requestCallback<_inference_SystemSharedMemoryUnregisterResponse__Output>): grpc.ClientUnaryCall;
  
}

export interface GRPCInferenceServiceHandlers extends grpc.UntypedServiceImplementation {
  ModelInfer: grpc.handleUnaryCall<_inference_ModelInferRequest__Output, _inference_ModelInferResponse>;
  
  ModelMetadata: grpc.handleUnaryCall<_inference_ModelMetadataRequest__Output, _inference_ModelMetadataResponse>;
  
  ModelReady: grpc.handleUnaryCall<_inference_ModelReadyRequest__Output, _inference_ModelReadyResponse>;
  
  ServerLive: grpc.handleUnaryCall<_inference_ServerLiveRequest__Output, _inference_ServerLiveResponse>;
  
  ServerMetadata: grpc.handleUnaryCall<_inference_ServerMetadataRequest__Output, _inference_ServerMetadataResponse>;
  
  ServerReady: grpc.handleUnaryCall<_inference_ServerReadyRequest__Output, _inference_ServerReadyResponse>;
  
  SystemSharedMemoryRegister: grpc.handleUnaryCall<_inference_SystemSharedMemoryRegisterRequest__Output, _inference_SystemSharedMemoryRegisterResponse>;
  
  SystemSharedMemoryStatus: grpc.handleUnaryCall<_inference_SystemSharedMemoryStatusRequest__Output, _inference_SystemSharedMemoryStatusResponse>;
  
  SystemSharedMemoryUnregister: grpc.handleUnaryCall<_inference_SystemSharedMemoryUnregisterRequest__Output, _inference_SystemSharedMemoryUnregisterResponse>;
  
}

export interface GRPCInferenceServiceDefinition extends grpc.ServiceDefinition {
  ModelInfer: MethodDefinition<_inference_ModelInferRequest, _inference_ModelInferResponse, _inference_ModelInferRequest__Output, _inference_ModelInferResponse__Output>
  ModelMetadata: MethodDefinition<_inference_ModelMetadataRequest, _inference_ModelMetadataResponse, _inference_ModelMetadataRequest__Output, _inference_ModelMetadataResponse__Output>
  ModelReady: MethodDefinition<_inference_ModelReadyRequest, _inference_ModelReadyResponse, _inference_ModelReadyRequest__Output, _inference_ModelReadyResponse__Output>
  ServerLive: MethodDefinition<_inference_ServerLiveRequest, _inference_ServerLiveResponse, _inference_ServerLiveRequest__Output, _inference_ServerLiveResponse__Output>
  ServerMetadata: MethodDefinition<_inference_ServerMetadataRequest, _inference_ServerMetadataResponse, _inference_ServerMetadataRequest__Output, _inference_ServerMetadataResponse__Output>
  ServerReady: MethodDefinition<_inference_ServerReadyRequest, _inference_ServerReadyResponse, _inference_ServerReadyRequest__Output, _inference_ServerReadyResponse__Output>
  SystemSharedMemoryRegister: MethodDefinition<_inference_SystemSharedMemoryRegisterRequest, _inference_SystemSharedMemoryRegisterResponse, _inference_SystemSharedMemoryRegisterRequest__Output, _inference_SystemSharedMemoryRegisterResponse__Output>
  SystemSharedMemoryStatus: MethodDefinition<_inference_SystemSharedMemoryStatusRequest, _inference_SystemSharedMemoryStatusResponse, _inference_SystemSharedMemoryStatusRequest__Output, _inference_SystemSharedMemoryStatusResponse__Output>
  SystemSharedMemoryUnregister: MethodDefinition<_inference_SystemSharedMemoryUnregisterRequest, _inference_SystemSharedMemoryUnregisterResponse, _inference_SystemSharedMemoryUnregisterRequest__Output, _inference_SystemSharedMemoryUnregisterResponse__Output>
}
