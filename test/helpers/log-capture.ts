import { appendFileSync } from 'node:fs';

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
