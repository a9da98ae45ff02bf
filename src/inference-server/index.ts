export { startInferenceServer, resolveServerOptions } from './server.js';
export type { ModelSource, ServerTls } from './server.js';
export type { InferenceServerOptions, RunningInferenceServer } from './server.js';
export { resolveModelFile, BUILTIN_MODELS } from './model-source.js';
