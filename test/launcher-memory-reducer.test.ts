import { execFile } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * V8's memory reducer and the launcher (src/runtime/v8-heap.ts): the reducer's full collections of
 * the main thread (memory-reducing mode: the heap compacted and dead ArrayBuffers freed in the
 * pause) were its longest collections during 24 MP cutouts, and they also kept the 16 x 12 MP peak
 * under 300 MB. So the launcher leaves the reducer on by default, and a host that would rather not
 * have its pauses gives `node --no-memory-reducer` to the launcher, which must pass it on to the app.
 *
 * The reducer starts about 8 s after a full collection when the thread's JavaScript then allocates
 * little, as the API's main thread does while its pixel work runs in workers. Its collection is a
 * major one flagged all-external-memory alone (V8 gives its own collections for external memory
 * pressure the synchronous-phantom flag beside it, a forced one the forced flag). The script below
 * runs one forced collection, then idles with a timer for 10 s and reports the major collections'
 * flags. Run on plain `node` (the control, V8's default) it must report one of the reducer's, or
 * the script no longer shows what it is meant to; through the launcher as it is, one too; through
 * the launcher started with `--no-memory-reducer`, none.
 */
const LAUNCH = path.resolve('dist/src/runtime/launch.js');
const IDLE_MS = 10_000;

const SCRIPT = `import v8 from 'node:v8';
import vm from 'node:vm';
import { constants, PerformanceObserver } from 'node:perf_hooks';
v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc');
v8.setFlagsFromString('--no-expose-gc');
const majors = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) if (e.detail.kind === constants.NODE_PERFORMANCE_GC_MAJOR) majors.push(e.detail.flags);
}).observe({ entryTypes: ['gc'] });
const live = [];
for (let i = 0; i < 100000; i++) live.push({ i });
gc();
const started = Date.now();
const timer = setInterval(() => {
  if (Date.now() - started < ${IDLE_MS}) return;
  clearInterval(timer);
  console.log('majors=' + JSON.stringify({ majors, reducerFlag: constants.NODE_PERFORMANCE_GC_FLAGS_ALL_EXTERNAL_MEMORY, forcedFlag: constants.NODE_PERFORMANCE_GC_FLAGS_FORCED, live: live.length }));
}, 100);
`;

function run(args: string[], env: Record<string, string | undefined>): Promise<{ majors: number[]; reducerFlag: number; forcedFlag: number }> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, args, { env, timeout: 60_000 }, (error, stdout) => {
      const line = stdout.split('\n').find((l) => l.startsWith('majors='));
      if (!line) return reject(error ?? new Error(`no report: ${stdout}`));
      resolve(JSON.parse(line.slice('majors='.length)));
    });
  });
}

describe('the launcher and V8 memory reducer', () => {
  it('keeps the reducer by default, and a --no-memory-reducer given to its node reaches the app (no reducer collection there)', { timeout: 60_000 }, async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-reducer-'));
    const script = path.join(dir, 'idle.mjs');
    await writeFile(script, SCRIPT);
    const env: Record<string, string | undefined> = { ...process.env, BGCUT_V8_HEAP: undefined, BGCUT_MALLOC: 'system' };
    const [launched, optedOut, plain] = await Promise.all([run([LAUNCH, script], env), run(['--no-memory-reducer', LAUNCH, script], env), run([script], env)]);
    const reducers = (r: { majors: number[]; reducerFlag: number }) => r.majors.filter((flags) => flags === r.reducerFlag).length;
    // All three ran the forced collection.
    for (const r of [launched, optedOut, plain]) expect(r.majors.filter((flags) => flags & r.forcedFlag)).toHaveLength(1);
    // The control: V8's default runs the reducer's collection in the idle time.
    expect(reducers(plain)).toBeGreaterThanOrEqual(1);
    // The launcher's default leaves it on.
    expect(reducers(launched)).toBeGreaterThanOrEqual(1);
    // The host's choice reaches the app: none.
    expect(reducers(optedOut)).toBe(0);
  });
});
