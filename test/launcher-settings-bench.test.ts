import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { launcherSettingsOf, OWN_LAUNCHER } from '../bench/launcher-settings.js';
import { GLIBC_MALLOC_TUNING } from '../src/runtime/allocator.js';
import { V8_HEAP_FLAGS } from '../src/runtime/v8-heap.js';

/**
 * The bench starts a `--compare` build's API with that build's own launcher settings, so a change
 * to the malloc tuning, libuv pool or V8 flags shows side by side (before, both APIs ran under
 * the benching build's).
 */
describe("the bench's launcher settings of a build", () => {
  it("reads this build's from its dist as what this build sets", async () => {
    expect(await launcherSettingsOf(path.resolve('dist'))).toEqual(OWN_LAUNCHER);
    expect(OWN_LAUNCHER.malloc).toEqual(GLIBC_MALLOC_TUNING);
    expect(OWN_LAUNCHER.v8Flags).toEqual(V8_HEAP_FLAGS);
  });

  it("reads another build's own settings from its dist, not this build's", async () => {
    const dist = await mkdtemp(path.join(os.tmpdir(), 'bgcut-other-dist-'));
    const runtime = path.join(dist, 'src/runtime');
    await mkdir(runtime, { recursive: true });
    await writeFile(path.join(runtime, 'allocator.js'), "export const GLIBC_MALLOC_TUNING = { MALLOC_ARENA_MAX: '2', MALLOC_MMAP_THRESHOLD_: '65536' };\n");
    await writeFile(path.join(runtime, 'libuv-pool.js'), "export const libuvPoolEnv = () => ({ UV_THREADPOOL_SIZE: '6' });\n");
    await writeFile(path.join(runtime, 'v8-heap.js'), "export const V8_HEAP_FLAGS = ['--initial-old-space-size=64'];\n");
    expect(await launcherSettingsOf(dist)).toEqual({
      malloc: { MALLOC_ARENA_MAX: '2', MALLOC_MMAP_THRESHOLD_: '65536' },
      libuv: { UV_THREADPOOL_SIZE: '6' },
      v8Flags: ['--initial-old-space-size=64'],
    });
  });
});
