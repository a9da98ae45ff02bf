import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { chooseAllocator, GLIBC_MALLOC_TUNING, JEMALLOC_PATHS, withoutLauncherMalloc } from '../src/runtime/allocator.js';
import { chooseHeapFlags, V8_HEAP_FLAGS } from '../src/runtime/v8-heap.js';
import { captureOutput } from './helpers/log-capture.js';

const LAUNCH = path.resolve('dist/src/runtime/launch.js');
const jemalloc = JEMALLOC_PATHS.find((p) => existsSync(p));
const TUNING = { MALLOC_ARENA_MAX: '1', MALLOC_MMAP_THRESHOLD_: '262144' };
const onGlibc = () => true;
const glibcLinux = process.platform === 'linux' && Boolean((process.report.getReport() as { header?: { glibcVersionRuntime?: string } }).header?.glibcVersionRuntime);

interface Report {
  allocator: string;
  ppid: number;
  args: string[];
  execArgv: string[];
  env: Record<string, string | undefined>;
  /** UV_THREADPOOL_SIZE as the app sees it. */
  uv?: string;
}

/** A script that prints the malloc it runs on, its parent, arguments and malloc variables, and exits with its first argument. */
async function reporter(): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-alloc-'));
  const file = path.join(dir, 'report.mjs');
  const allocator = path.resolve('dist/src/runtime/allocator.js');
  await writeFile(
    file,
    `import { runningAllocator } from ${JSON.stringify(allocator)};
const names = ['MALLOC_ARENA_MAX', 'MALLOC_MMAP_THRESHOLD_', 'LD_PRELOAD', 'BGCUT_MALLOC_ENV'];
const env = Object.fromEntries(names.map((name) => [name, process.env[name]]));
console.log('report=' + JSON.stringify({ allocator: runningAllocator(), ppid: process.ppid, args: process.argv.slice(2), execArgv: process.execArgv, env, uv: process.env.UV_THREADPOOL_SIZE }));
process.exit(Number(process.argv[2] ?? 0));
`,
  );
  return file;
}

/** Runs bgcut-launch (under `node nodeArgs...`) with this process's environment less every malloc and heap setting, plus `env`. */
function launch(
  args: string[],
  env: Record<string, string> = {},
  nodeArgs: string[] = [],
): Promise<{ stdout: string; stderr: string; code: number; pid: number; report?: Report }> {
  const base = { ...process.env };
  for (const name of ['LD_PRELOAD', 'MALLOC_ARENA_MAX', 'MALLOC_MMAP_THRESHOLD_', 'GLIBC_TUNABLES', 'BGCUT_MALLOC', 'BGCUT_JEMALLOC', 'BGCUT_MALLOC_ENV', 'BGCUT_V8_HEAP', 'UV_THREADPOOL_SIZE']) delete base[name];
  return new Promise((resolve) => {
    const child = execFile(process.execPath, [...nodeArgs, LAUNCH, ...args], { env: { ...base, ...env } }, (error, stdout, stderr) => {
      captureOutput(stdout + stderr);
      const line = stdout.split('\n').find((l) => l.startsWith('report='));
      const code = error && typeof error.code === 'number' ? error.code : 0;
      resolve({ stdout, stderr, code, pid: child.pid!, report: line ? (JSON.parse(line.slice('report='.length)) as Report) : undefined });
    });
  });
}

describe('choosing the API process malloc', () => {
  const lib = path.join(os.tmpdir(), 'libjemalloc.so.2');
  const missing = '/nonexistent/libjemalloc.so.2';

  it('exports the tuning MALLOC_ARENA_MAX=1 MALLOC_MMAP_THRESHOLD_=262144', () => {
    expect(GLIBC_MALLOC_TUNING).toEqual(TUNING);
  });

  it('chooses the glibc tuning on glibc Linux by default, for BGCUT_MALLOC=tuned and for the old BGCUT_JEMALLOC=0', async () => {
    await writeFile(lib, '');
    for (const env of [{}, { BGCUT_MALLOC: 'tuned' }, { BGCUT_JEMALLOC: '0' }, { BGCUT_JEMALLOC: 'false' }]) {
      expect(chooseAllocator(env, 'linux', [lib], onGlibc)).toEqual({ malloc: 'tuned', env: TUNING });
    }
  });

  it('chooses jemalloc when asked for and its library is there (BGCUT_MALLOC=jemalloc, BGCUT_JEMALLOC=1 or a path)', async () => {
    await writeFile(lib, '');
    expect(chooseAllocator({ BGCUT_MALLOC: 'jemalloc' }, 'linux', [missing, lib], onGlibc)).toEqual({ malloc: 'jemalloc', env: { LD_PRELOAD: lib } });
    expect(chooseAllocator({ BGCUT_JEMALLOC: '1' }, 'linux', [lib], onGlibc)).toEqual({ malloc: 'jemalloc', env: { LD_PRELOAD: lib } });
    expect(chooseAllocator({ BGCUT_JEMALLOC: lib }, 'linux', [missing], onGlibc)).toEqual({ malloc: 'jemalloc', env: { LD_PRELOAD: lib } });
    expect(chooseAllocator({ BGCUT_MALLOC: 'jemalloc', BGCUT_JEMALLOC: lib }, 'linux', [missing], onGlibc)).toEqual({ malloc: 'jemalloc', env: { LD_PRELOAD: lib } });
  });

  it('BGCUT_MALLOC wins over BGCUT_JEMALLOC', async () => {
    await writeFile(lib, '');
    expect(chooseAllocator({ BGCUT_MALLOC: 'tuned', BGCUT_JEMALLOC: lib }, 'linux', [lib], onGlibc)).toEqual({ malloc: 'tuned', env: TUNING });
    expect(chooseAllocator({ BGCUT_MALLOC: 'system', BGCUT_JEMALLOC: lib }, 'linux', [lib], onGlibc)).toMatchObject({ malloc: 'system', env: null });
  });

  it('falls back to the tuning, with the reason, when jemalloc is asked for and its library is missing', () => {
    expect(chooseAllocator({ BGCUT_MALLOC: 'jemalloc' }, 'linux', [missing], onGlibc)).toEqual({
      malloc: 'tuned',
      env: TUNING,
      reason: expect.stringMatching(/BGCUT_MALLOC=jemalloc but libjemalloc\.so\.2 is not there .*apt-get install libjemalloc2.*glibc tuned instead/),
    });
    expect(chooseAllocator({ BGCUT_JEMALLOC: missing }, 'linux', [lib], onGlibc)).toMatchObject({ malloc: 'tuned', env: TUNING, reason: expect.stringContaining(`BGCUT_JEMALLOC=${missing} but`) });
  });

  it('sets nothing when the user set LD_PRELOAD, MALLOC_ARENA_MAX, MALLOC_MMAP_THRESHOLD_ or GLIBC_TUNABLES, and says which', async () => {
    await writeFile(lib, '');
    const userSet = { LD_PRELOAD: '/opt/other.so', MALLOC_ARENA_MAX: '4', MALLOC_MMAP_THRESHOLD_: '65536', GLIBC_TUNABLES: 'glibc.malloc.arena_max=1' };
    for (const [name, value] of Object.entries(userSet)) {
      for (const malloc of ['tuned', 'jemalloc']) {
        expect(chooseAllocator({ BGCUT_MALLOC: malloc, [name]: value }, 'linux', [lib], onGlibc)).toEqual({ malloc: 'system', env: null, reason: `${name}=${value} set already: left as it is` });
      }
    }
  });

  it('sets nothing off Linux, off glibc, or for BGCUT_MALLOC=system, and says why', async () => {
    await writeFile(lib, '');
    expect(chooseAllocator({}, 'darwin', [lib], onGlibc)).toEqual({ malloc: 'system', env: null, reason: expect.stringContaining('not Linux (darwin)') });
    expect(chooseAllocator({ BGCUT_MALLOC: 'jemalloc' }, 'win32', [lib], onGlibc)).toMatchObject({ malloc: 'system', env: null, reason: expect.stringContaining('not Linux') });
    expect(chooseAllocator({}, 'linux', [lib], () => false)).toEqual({ malloc: 'system', env: null, reason: expect.stringContaining('not glibc') });
    expect(chooseAllocator({ BGCUT_MALLOC: 'system' }, 'linux', [lib], onGlibc)).toEqual({ malloc: 'system', env: null, reason: 'BGCUT_MALLOC=system' });
  });

  it('rejects a BGCUT_MALLOC it does not know', () => {
    expect(() => chooseAllocator({ BGCUT_MALLOC: 'jemaloc' }, 'linux', [lib], onGlibc)).toThrow(/BGCUT_MALLOC=jemaloc: expected tuned/);
  });
});

describe('choosing the API process V8 heap flags', () => {
  it('adds --initial-old-space-size=128 and --max-semi-space-size=2 by default and for BGCUT_V8_HEAP=tuned', () => {
    const all = ['--initial-old-space-size=128', '--max-semi-space-size=2'];
    expect(V8_HEAP_FLAGS).toEqual(all);
    expect(chooseHeapFlags([], {})).toEqual({ flags: all });
    expect(chooseHeapFlags(['--inspect'], { BGCUT_V8_HEAP: 'tuned' })).toEqual({ flags: all });
  });

  it("leaves the young generation to a user who sized it, and still adds the initial old space", () => {
    expect(chooseHeapFlags(['--max-semi-space-size=8'], {})).toEqual({ flags: ['--initial-old-space-size=128'], reason: '--max-semi-space-size=8 given already' });
    expect(chooseHeapFlags(['--semi_space_growth_factor=4'], {}).flags).toEqual(['--initial-old-space-size=128']);
  });

  it("adds none for BGCUT_V8_HEAP=default, and leaves out the one node was given a setting of its own for, and says why", () => {
    expect(chooseHeapFlags([], { BGCUT_V8_HEAP: 'default' })).toEqual({ flags: [], reason: 'BGCUT_V8_HEAP=default' });
    expect(chooseHeapFlags(['--initial-old-space-size=512'], {})).toEqual({ flags: ['--max-semi-space-size=2'], reason: '--initial-old-space-size=512 given already' });
    expect(chooseHeapFlags(['--initial_heap_size=64'], {})).toEqual({ flags: ['--max-semi-space-size=2'], reason: '--initial_heap_size=64 given already' });
    expect(chooseHeapFlags(['--initial-heap-size=64', '--min-semi-space-size=1'], {})).toEqual({
      flags: [],
      reason: '--initial-heap-size=64 given already, --min-semi-space-size=1 given already',
    });
    // A maximum alone is not a starting size, and the memory reducer is the host's choice: both flags are still added.
    expect(chooseHeapFlags(['--max-old-space-size=4096', '--no-memory-reducer'], {}).flags).toEqual(['--initial-old-space-size=128', '--max-semi-space-size=2']);
  });

  it('rejects a BGCUT_V8_HEAP it does not know', () => {
    expect(() => chooseHeapFlags([], { BGCUT_V8_HEAP: 'on' })).toThrow(/BGCUT_V8_HEAP=on: expected tuned \(the default\) or default/);
  });
});

describe('the inference server environment of examples/start.ts (withoutLauncherMalloc)', () => {
  it("drops the variables the launcher listed in BGCUT_MALLOC_ENV, and that list, and keeps the user's own", () => {
    const launched = { PATH: '/bin', ...TUNING, BGCUT_MALLOC_ENV: 'MALLOC_ARENA_MAX,MALLOC_MMAP_THRESHOLD_' };
    expect(withoutLauncherMalloc(launched)).toEqual({ PATH: '/bin' });
    const preloaded = { PATH: '/bin', LD_PRELOAD: '/usr/lib/libjemalloc.so.2', BGCUT_MALLOC_ENV: 'LD_PRELOAD' };
    expect(withoutLauncherMalloc(preloaded)).toEqual({ PATH: '/bin' });
    // The user's own settings: the launcher set nothing, so there is no list.
    const own = { PATH: '/bin', MALLOC_ARENA_MAX: '4', LD_PRELOAD: '/opt/other.so', GLIBC_TUNABLES: 'glibc.malloc.arena_max=1' };
    expect(withoutLauncherMalloc(own)).toEqual(own);
    // Only the listed names go, even beside other malloc variables.
    expect(withoutLauncherMalloc({ ...launched, LD_PRELOAD: '/opt/other.so' })).toEqual({ PATH: '/bin', LD_PRELOAD: '/opt/other.so' });
  });
});

describe('bgcut-launch', () => {
  it.runIf(glibcLinux)('runs the app as its child with the glibc tuning in the environment and the V8 heap flag by default, passing on its arguments and exit code', async () => {
    const script = await reporter();
    const { stdout, code, pid, report } = await launch([script, '3', 'two words']);
    expect(stdout).toContain(`bgcut-launch: starting ${script} on glibc malloc, tuned (MALLOC_ARENA_MAX=1 MALLOC_MMAP_THRESHOLD_=262144), --initial-old-space-size=128 --max-semi-space-size=2`);
    expect(report).toEqual({
      allocator: 'glibc tuned',
      ppid: pid,
      args: ['3', 'two words'],
      execArgv: ['--initial-old-space-size=128', '--max-semi-space-size=2'],
      env: { ...TUNING, BGCUT_MALLOC_ENV: 'MALLOC_ARENA_MAX,MALLOC_MMAP_THRESHOLD_' },
      uv: '8',
    });
    expect(code).toBe(3);
  });

  it.runIf(glibcLinux)('falls back to the tuning when jemalloc is asked for from a missing path, logging why', async () => {
    const script = await reporter();
    const { stderr, report, code } = await launch([script, '0'], { BGCUT_MALLOC: 'jemalloc', BGCUT_JEMALLOC: '/nonexistent/libjemalloc.so.2' });
    expect(stderr).toContain('bgcut-launch: BGCUT_MALLOC=jemalloc but libjemalloc.so.2 is not there (/nonexistent/libjemalloc.so.2; apt-get install libjemalloc2): glibc tuned instead');
    expect(report?.allocator).toBe('glibc tuned');
    expect(report?.env).toMatchObject(TUNING);
    expect(code).toBe(0);
  });

  it.skipIf(!jemalloc)('runs the app on jemalloc with BGCUT_MALLOC=jemalloc, passing on its arguments and exit code', async () => {
    const script = await reporter();
    const { stdout, code, report } = await launch([script, '3'], { BGCUT_MALLOC: 'jemalloc' });
    expect(stdout).toContain(`on jemalloc (LD_PRELOAD=${jemalloc})`);
    expect(report).toMatchObject({ allocator: 'jemalloc', args: ['3'], env: { LD_PRELOAD: jemalloc, BGCUT_MALLOC_ENV: 'LD_PRELOAD' } });
    expect(report?.env.MALLOC_ARENA_MAX).toBeUndefined();
    expect(code).toBe(3);
  });

  it('runs the app as its child on the system malloc with BGCUT_MALLOC=system, with the heap flag and no malloc variables, logging why', async () => {
    const script = await reporter();
    const { stdout, code, pid, report } = await launch([script, '0'], { BGCUT_MALLOC: 'system' });
    expect(stdout).toContain(`bgcut-launch: starting ${script} on the system malloc (BGCUT_MALLOC=system), --initial-old-space-size=128 --max-semi-space-size=2`);
    expect(report).toMatchObject({ allocator: 'system', ppid: pid, execArgv: ['--initial-old-space-size=128', '--max-semi-space-size=2'], env: {} });
    expect(code).toBe(0);
  });

  it('runs the app in its own process with BGCUT_MALLOC=system and BGCUT_V8_HEAP=default, logging why', async () => {
    const script = await reporter();
    const { stdout, code, report } = await launch([script, '0'], { BGCUT_MALLOC: 'system', BGCUT_V8_HEAP: 'default' });
    expect(stdout).toContain(`bgcut-launch: starting ${script} on the system malloc: BGCUT_MALLOC=system; V8's own heap settings (BGCUT_V8_HEAP=default)`);
    expect(report?.allocator).toBe('system');
    expect(report?.ppid).toBe(process.pid); // the launcher's own process, whose parent is this one
    expect(report?.execArgv).toEqual([]);
    expect(report?.env).toEqual({});
    expect(code).toBe(0);
  });

  it('gives the app libuv\'s pool of 8 (UV_THREADPOOL_SIZE) as a child and in its own process, and keeps a size the user set', async () => {
    const script = await reporter();
    expect((await launch([script, '0'])).report?.uv).toBe('8');
    expect((await launch([script, '0'], { BGCUT_MALLOC: 'system', BGCUT_V8_HEAP: 'default' })).report?.uv).toBe('8');
    expect((await launch([script, '0'], { UV_THREADPOOL_SIZE: '3' })).report?.uv).toBe('3');
  });

  it.runIf(process.platform === 'linux')("keeps the user's MALLOC_ARENA_MAX as it is, logging why", async () => {
    const script = await reporter();
    const { stdout, report } = await launch([script, '0'], { MALLOC_ARENA_MAX: '4' });
    expect(stdout).toContain('on the system malloc (MALLOC_ARENA_MAX=4 set already: left as it is), --initial-old-space-size=128 --max-semi-space-size=2');
    expect(report?.env).toEqual({ MALLOC_ARENA_MAX: '4' });
  });

  it.runIf(glibcLinux)("keeps the user's own initial heap size and adds no size of its own (node --initial-heap-size=64 bgcut-launch ...)", async () => {
    const script = await reporter();
    const { stdout, report } = await launch([script, '0'], {}, ['--initial-heap-size=64']);
    expect(stdout).toContain('--max-semi-space-size=2 (--initial-heap-size=64 given already)');
    expect(report?.execArgv).toEqual(['--max-semi-space-size=2', '--initial-heap-size=64']);
    expect(report?.allocator).toBe('glibc tuned');
  });

  it("bounds every thread's young generation: the app's main thread and a worker of it keep at most 4 MiB of new space after a busy spell", async () => {
    // Objects that live a while, as a busy thread's do, make V8 grow the new space to its limit:
    // 32 MiB per thread by V8's default (16 MiB semi-spaces), where dead Buffers wait for a
    // young collection (v8-heap.ts). The bound is the launcher's flag; without it this reads 32 MiB.
    const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-young-'));
    const script = path.join(dir, 'young.mjs');
    await writeFile(
      script,
      `import v8 from 'node:v8';
import { Worker, isMainThread, parentPort } from 'node:worker_threads';
function busy() {
  const kept = [];
  for (let i = 0; i < 400000; i++) { kept.push({ i, s: 'x' + i }); if (kept.length > 100000) kept.splice(0, 50000); }
  return v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size;
}
if (isMainThread) {
  const main = busy();
  const worker = new Worker(new URL(import.meta.url));
  worker.once('message', (inWorker) => { console.log('report=' + JSON.stringify({ main, worker: inWorker })); worker.terminate(); });
} else parentPort.postMessage(busy());
`,
    );
    const { report } = await launch([script]);
    const spaces = report as unknown as { main: number; worker: number };
    expect(spaces.main).toBeGreaterThan(0);
    expect(spaces.main).toBeLessThanOrEqual(4 * 1024 * 1024);
    expect(spaces.worker).toBeGreaterThan(0);
    expect(spaces.worker).toBeLessThanOrEqual(4 * 1024 * 1024);
  });

  it.each([
    ['BGCUT_MALLOC', 'jemaloc', 'bgcut-launch: BGCUT_MALLOC=jemaloc: expected tuned (the default), jemalloc or system'],
    ['BGCUT_V8_HEAP', 'big', 'bgcut-launch: BGCUT_V8_HEAP=big: expected tuned (the default) or default'],
  ])('exits with 2 and a message for a %s it does not know (%s)', async (name, value, message) => {
    const script = await reporter();
    const { stderr, code, report } = await launch([script, '0'], { [name]: value });
    expect(stderr).toContain(message);
    expect(report).toBeUndefined();
    expect(code).toBe(2);
  });
});
