/**
 * ModelInfer messages this thread's inference clients have encoded for sending (the request,
 * which grpc-js then frames and writes in the same thread) and decoded (the answer, with its
 * mask). One increment per message. The API makes its ModelInfer calls on an inference thread
 * (src/core/inference/inference-thread.ts): a test reads the host's main-thread counts after
 * real cutouts and fails if either is not zero.
 */
export const modelInferMessages = { encoded: 0, decoded: 0 };
