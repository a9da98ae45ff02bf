export { startInferenceServer, resolveServerOptions } from './server.js';
export type { ModelSource, ServerTls } from './server.js';
export type { InferenceServerOptions, RunningInferenceServer } from './server.js';
export { resolveModelFile, BUILTIN_MODELS } from './model-source.js';
export { defaultCacheDir } from './model-source.js';
export { prepareModel, type PrepareOptions, type PreparedModelInfo } from './prepare-model.js';
export { exportTritonRepository, tritonConfig, type TritonExportOptions } from './triton-export.js';
export { probeHealth, type HealthProbeOptions } from './health-probe.js';
