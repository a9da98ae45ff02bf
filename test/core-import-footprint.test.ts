import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * `bgcut/core` exports optional back-ends (BullMQ queues, the S3 results store) whose packages
 * are large (about 40 MB of resident memory together): they load when one is made, not when the
 * core is imported (src/util/lazy-module.ts). Checked on the build (`npm test` builds first) in a
 * fresh Node process, by the packages in its module cache.
 */
const CORE = fileURLToPath(new URL('../dist/src/core/index.js', import.meta.url));

function loadedPackagesAfter(script: string): string[] {
  const out = execFileSync(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `const core = await import(${JSON.stringify(CORE)});
       ${script}
       const { createRequire } = await import('node:module');
       const names = new Set(Object.keys(createRequire(import.meta.url).cache).map((f) => /node_modules\\/((@[^/]+\\/)?[^/]+)/.exec(f)?.[1]).filter(Boolean));
       console.log(JSON.stringify([...names]));`,
    ],
    { encoding: 'utf8', timeout: 60_000 },
  );
  return JSON.parse(out.trim().split('\n').pop()!) as string[];
}

describe('what importing bgcut/core loads', () => {
  it('neither bullmq nor the S3 client at import (the gRPC client, which every API uses, is loaded)', () => {
    const loaded = loadedPackagesAfter('');
    expect(loaded).toContain('@grpc/grpc-js');
    expect(loaded).not.toContain('bullmq');
    expect(loaded.filter((name) => name.startsWith('@aws-sdk/'))).toEqual([]);
  });

  it('the S3 client once an S3ResultsStore is made (no request is sent by making it)', () => {
    const loaded = loadedPackagesAfter(`new core.S3ResultsStore({ bucket: 'b', client: { region: 'us-east-1', endpoint: 'http://127.0.0.1:1' } });`);
    expect(loaded).toContain('@aws-sdk/client-s3');
    expect(loaded).not.toContain('bullmq');
  });
});
