import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { PIXEL_WORKER_FILE } from '../../src/core/image/pixel-pool.js';

// piscina require()s its handler file first. On Node 20 a require() of an ES module raced by an
// import() of the same graph aborted a test process (V8 FATAL ERROR, CI 2026-11-26): the pool's
// threads must load a CommonJS entry that reaches the ES module through import() only.
describe('the pixel pool loads its threads from a CommonJS entry', () => {
  it('is a .cjs file whose require() gives every handler the pool calls, and which does not require() the ES worker', () => {
    const file = new URL(PIXEL_WORKER_FILE);
    expect(file.pathname.endsWith('.cjs')).toBe(true);
    const source = readFileSync(file, 'utf8');
    expect(source).not.toMatch(/require\(["']\.\/pixel-worker\.js["']\)/);
    const entry = createRequire(import.meta.url)(file.pathname) as Record<string, unknown>;
    for (const name of ['fullSizeMask', 'mergeMasks', 'upscaleMask', 'looksConfidence', 'workingView', 'objectCrop', 'render', 'kernelCalls']) {
      expect(typeof entry[name], name).toBe('function');
    }
  });

  it('runs a handler through the entry', async () => {
    const entry = createRequire(import.meta.url)(new URL(PIXEL_WORKER_FILE).pathname) as { kernelCalls: () => Promise<unknown> };
    const calls = await entry.kernelCalls();
    expect(calls).toBeTypeOf('object');
  });
});
