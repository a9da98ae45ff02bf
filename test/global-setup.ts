import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { startInferenceProcess, type InferenceProcess } from './helpers/inference-process.js';

declare module 'vitest' {
  export interface ProvidedContext {
    inferenceAddress: string;
    /** The shared inference server's Prometheus endpoint. */
    inferenceMetricsUrl: string;
  }
}

let server: InferenceProcess | undefined;

/** One real inference server with the real model, shared by every suite that does not stop it. */
const captureDir = mkdtempSync(path.join(os.tmpdir(), 'bgcut-logscan-'));
process.env.BGCUT_TEST_OUTPUT_CAPTURE = path.join(captureDir, 'output.log');
process.env.BGCUT_TEST_ISSUED_KEYS = path.join(captureDir, 'issued-keys.txt');

export async function setup(project: TestProject): Promise<void> {
  writeFileSync(process.env.BGCUT_TEST_OUTPUT_CAPTURE!, '');
  writeFileSync(process.env.BGCUT_TEST_ISSUED_KEYS!, '');
  server = await startInferenceProcess(['--metrics-port', '0']);
  project.provide('inferenceAddress', server.address);
  project.provide('inferenceMetricsUrl', server.metricsUrl!);
}

/** Fails the run if any key a test issued shows up in anything the test processes printed. */
export async function teardown(): Promise<void> {
  await server?.stop();
  const output = readFileSync(process.env.BGCUT_TEST_OUTPUT_CAPTURE!, 'utf8');
  const keys = [...new Set(readFileSync(process.env.BGCUT_TEST_ISSUED_KEYS!, 'utf8').split('\n').filter(Boolean))];
  const leaked = keys.filter((key) => output.includes(key));
  console.log(`log scan: ${output.length} characters of test output, ${keys.length} issued keys, ${leaked.length} found in the output`);
  if (leaked.length > 0) {
    // vitest reports an error thrown here but still exits 0: set the exit code as well.
    process.exitCode = 1;
    throw new Error(`log scan: ${leaked.length} full API key(s) appeared in test output`);
  }
}
