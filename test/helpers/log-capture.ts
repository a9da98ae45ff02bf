import { appendFileSync } from 'node:fs';
import { inspect } from 'node:util';

/**
 * Every key a test issues is listed in a file, and everything the test processes print is
 * captured to another (see test/setup/capture-output.ts); the global teardown checks that no
 * key appears in the output.
 */
export function recordIssuedKeys(keys: string[]): void {
  const file = process.env.BGCUT_TEST_ISSUED_KEYS;
  if (file) appendFileSync(file, keys.map((k) => `${k}\n`).join(''));
}

export function captureOutput(text: string): void {
  const file = process.env.BGCUT_TEST_OUTPUT_CAPTURE;
  if (file) appendFileSync(file, text);
}

/** Written to the capture by each test process's tee, so the scan can prove it saw them. */
export const TEE_MARKER = '[logscan] tee active in test process';

/**
 * For handlers whose tests expect 5xx failures and keep the console quiet: the error goes to the
 * capture (scanned for keys) instead of nowhere. Use it rather than an empty function.
 */
export function captureInternalError(error: unknown): void {
  captureOutput(`onInternalError: ${inspect(error, { depth: 6 })}\n`);
}
