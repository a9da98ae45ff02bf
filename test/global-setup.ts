import type { TestProject } from 'vitest/node';
import { startInferenceProcess, type InferenceProcess } from './helpers/inference-process.js';

declare module 'vitest' {
  export interface ProvidedContext {
    inferenceAddress: string;
  }
}

let server: InferenceProcess | undefined;

/** One real inference server with the real model, shared by every suite that does not stop it. */
export async function setup(project: TestProject): Promise<void> {
  server = await startInferenceProcess();
  project.provide('inferenceAddress', server.address);
}

export async function teardown(): Promise<void> {
  await server?.stop();
}
