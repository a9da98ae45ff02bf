import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { chooseAllocator, JEMALLOC_PATHS } from '../src/runtime/allocator.js';
import { captureOutput } from './helpers/log-capture.js';

const run = promisify(execFile);
const LAUNCH = path.resolve('dist/src/runtime/launch.js');
const jemalloc = JEMALLOC_PATHS.find((p) => existsSync(p));

/** A script that reports the malloc it runs on and exits with the code it is given. */
async function reporter(): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-alloc-'));
  const file = path.join(dir, 'report.mjs');
  const allocator = path.resolve('dist/src/runtime/allocator.js');
  await writeFile(file, `import { runningAllocator } from ${JSON.stringify(allocator)};\nconsole.log('allocator=' + runningAllocator());\nprocess.exit(Number(process.argv[2] ?? 0));\n`);
  return file;
}

async function launch(args: string[], env: Record<string, string> = {}) {
  const result = await run(process.execPath, [LAUNCH, ...args], { env: { ...process.env, LD_PRELOAD: '', ...env } }).catch((error: { code: number; stdout: string; stderr: string }) => error);
  const stdout = 'stdout' in result ? result.stdout : '';
  captureOutput(stdout);
  return { stdout, code: 'code' in result && typeof result.code === 'number' ? result.code : 0 };
}

describe('choosing the API process malloc', () => {
  const lib = path.join(os.tmpdir(), 'libjemalloc.so.2');

  it('preloads jemalloc on glibc Linux when the library is there, and says why not otherwise', async () => {
    await writeFile(lib, '');
    const glibc = Boolean((process.report.getReport() as { header?: { glibcVersionRuntime?: string } }).header?.glibcVersionRuntime);
    if (process.platform === 'linux' && glibc) expect(chooseAllocator({}, 'linux', [lib])).toEqual({ preload: lib });
    expect(chooseAllocator({ BGCUT_JEMALLOC: '0' }, 'linux', [lib])).toMatchObject({ preload: null, reason: 'BGCUT_JEMALLOC=0' });
    expect(chooseAllocator({}, 'darwin', [lib])).toMatchObject({ preload: null, reason: expect.stringContaining('not Linux') });
    expect(chooseAllocator({ LD_PRELOAD: '/opt/other.so' }, 'linux', [lib])).toMatchObject({ preload: null, reason: expect.stringContaining('LD_PRELOAD is set') });
    if (process.platform === 'linux' && glibc) {
      expect(chooseAllocator({}, 'linux', ['/nonexistent/libjemalloc.so.2'])).toMatchObject({ preload: null, reason: expect.stringContaining('apt-get install libjemalloc2') });
    }
  });

  it.skipIf(!jemalloc)('bgcut-launch runs the app on jemalloc, passing on its arguments and exit code', async () => {
    const script = await reporter();
    const { stdout, code } = await launch([script, '3']);
    expect(stdout).toContain(`on jemalloc (${jemalloc})`);
    expect(stdout).toContain('allocator=jemalloc');
    expect(code).toBe(3);
  });

  it('bgcut-launch falls back to the system malloc in this process, logging why', async () => {
    const script = await reporter();
    const { stdout, code } = await launch([script, '0'], { BGCUT_JEMALLOC: '0' });
    expect(stdout).toContain('on the system malloc: BGCUT_JEMALLOC=0');
    expect(stdout).toContain('allocator=system');
    expect(code).toBe(0);
  });
});
