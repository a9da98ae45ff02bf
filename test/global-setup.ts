import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { startInferenceProcess, type InferenceProcess } from './helpers/inference-process.js';
import { captureOutput, TEE_MARKER } from './helpers/log-capture.js';

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
const MAIN_MARKER = '[logscan] tee active in the vitest process';

/**
 * Vitest's own output (its reporter prints failed assertions, diffs and console output from
 * here) goes to the capture too. The global teardown runs after the reporter has printed the
 * run's results, so they are scanned.
 */
function teeMainProcessOutput(): void {
  for (const stream of [process.stdout, process.stderr]) {
    const write = stream.write.bind(stream) as (...args: unknown[]) => boolean;
    stream.write = ((chunk: unknown, ...rest: unknown[]) => {
      captureOutput(typeof chunk === 'string' ? chunk : Buffer.from(chunk as Uint8Array).toString());
      return write(chunk, ...rest);
    }) as typeof stream.write;
  }
  captureOutput(`${MAIN_MARKER}\n`);
}

export async function setup(project: TestProject): Promise<void> {
  writeFileSync(process.env.BGCUT_TEST_OUTPUT_CAPTURE!, '');
  writeFileSync(process.env.BGCUT_TEST_ISSUED_KEYS!, '');
  teeMainProcessOutput();
  server = await startInferenceProcess(['--metrics-port', '0']);
  project.provide('inferenceAddress', server.address);
  project.provide('inferenceMetricsUrl', server.metricsUrl!);
}

/** Keys from `keys` that appear in `output`. */
export function leakedKeys(output: string, keys: string[]): string[] {
  return keys.filter((key) => output.includes(key));
}

/** Test files that throw away a handler's internal errors, where the scan cannot see them. */
function silencedInternalErrors(): string[] {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith('.ts') && /onInternalError:\s*\(\s*\w*\s*\)\s*=>\s*(\{\s*\}|undefined|void 0)/.test(readFileSync(full, 'utf8'))) files.push(full);
    }
  };
  walk(path.dirname(new URL(import.meta.url).pathname));
  return files;
}

/**
 * Fails the run if any key a test issued shows up in anything printed: by the test processes,
 * by vitest itself, by the inference servers, Redis and the CLI the tests start, or handed to
 * `onInternalError`. It first proves it looked: the capture must hold output from vitest and
 * from the test processes, keys must have been issued, and the matcher must find a planted key.
 */
export async function teardown(): Promise<void> {
  await server?.stop();
  const output = readFileSync(process.env.BGCUT_TEST_OUTPUT_CAPTURE!, 'utf8');
  const keys = [...new Set(readFileSync(process.env.BGCUT_TEST_ISSUED_KEYS!, 'utf8').split('\n').filter(Boolean))];
  const leaked = leakedKeys(output, keys);
  const problems: string[] = [];
  if (!output.includes(MAIN_MARKER)) problems.push("the capture holds nothing from vitest's own process");
  if (!output.includes(TEE_MARKER)) problems.push('the capture holds nothing from any test process');
  if (output.replaceAll(MAIN_MARKER, '').replaceAll(TEE_MARKER, '').trim().length === 0) problems.push('the capture is empty');
  const planted = 'bgk_logscan_self_test_0000000000';
  if (leakedKeys(`some output ${planted} more`, [planted]).length !== 1) problems.push('the matcher does not find a planted key');
  const silenced = silencedInternalErrors();
  if (silenced.length > 0) problems.push(`internal errors are thrown away (use captureInternalError) in ${silenced.join(', ')}`);
  if (leaked.length > 0) problems.push(`${leaked.length} full API key(s) appeared in test output`);
  if (keys.length === 0) console.log('log scan: no test issued a key in this run, nothing to look for');
  console.log(`log scan: ${output.length} characters of output (vitest, test processes, servers, CLI, internal errors), ${keys.length} issued keys, ${leaked.length} found in the output`);
  if (problems.length > 0) {
    // vitest reports an error thrown here but still exits 0: set the exit code as well.
    process.exitCode = 1;
    throw new Error(`log scan: ${problems.join('; ')}`);
  }
}
