#!/usr/bin/env node
/**
 * bgcut-launch <script.js> [args...]: runs a Node app (the API) on the malloc chosen in
 * allocator.ts (by default glibc tuned: MALLOC_ARENA_MAX=1 MALLOC_MMAP_THRESHOLD_=262144;
 * BGCUT_MALLOC=jemalloc preloads jemalloc; BGCUT_MALLOC=system sets nothing) and with the V8 heap
 * flags of v8-heap.ts (`--initial-old-space-size=128 --max-semi-space-size=2`; BGCUT_V8_HEAP=default
 * leaves them out). glibc
 * reads those variables, the loader LD_PRELOAD and V8 its heap flags only when a process starts,
 * so the app is started again as a child with them set; signals are passed on to the child, and
 * its exit code is this process's. When nothing is to be set, the app runs in this process as it
 * is, after logging why. `npm start` goes through it. Either way libuv's pool gets
 * UV_THREADPOOL_SIZE=8 unless the variable is set (libuv-pool.ts).
 */
import { spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { type AllocatorChoice, chooseAllocator, LAUNCHER_MALLOC_ENV } from './allocator.js';
import { chooseHeapFlags, type HeapChoice } from './v8-heap.js';
import { libuvPoolEnv } from './libuv-pool.js';

const [script, ...args] = process.argv.slice(2);
if (!script) {
  console.error('usage: bgcut-launch <script.js> [args...]');
  process.exit(2);
}

let choice: AllocatorChoice;
let heap: HeapChoice;
try {
  choice = chooseAllocator();
  heap = chooseHeapFlags();
} catch (error) {
  console.error(`bgcut-launch: ${(error as Error).message}`);
  process.exit(2);
}

const mallocText =
  choice.env === null
    ? `the system malloc (${choice.reason})`
    : `${choice.malloc === 'jemalloc' ? 'jemalloc' : 'glibc malloc, tuned'} (${Object.entries(choice.env).map(([name, value]) => `${name}=${value}`).join(' ')})`;
const heapText = heap.flags.length > 0 ? `${heap.flags.join(' ')}${heap.reason ? ` (${heap.reason})` : ''}` : `V8's own heap settings (${heap.reason})`;
if (choice.env !== null || heap.flags.length > 0) {
  if (choice.env !== null && choice.reason) console.warn(`bgcut-launch: ${choice.reason}`);
  console.log(`bgcut-launch: starting ${script} on ${mallocText}, ${heapText}`);
  const child = spawn(process.execPath, [...heap.flags, ...process.execArgv, script, ...args], {
    stdio: 'inherit',
    // BGCUT_MALLOC_ENV tells the app which variables are the launcher's, so it can leave them
    // out of the processes it starts itself (withoutLauncherMalloc: the inference server keeps
    // the system malloc).
    env: { ...process.env, ...libuvPoolEnv(), ...(choice.env === null ? {} : { ...choice.env, [LAUNCHER_MALLOC_ENV]: Object.keys(choice.env).join(',') }) },
  });
  // SIGTERM and SIGHUP (from a supervisor, to this pid) are passed on; Ctrl-C's SIGINT reaches
  // the child from the terminal itself, so this process only waits for the child to end.
  for (const signal of ['SIGTERM', 'SIGHUP'] as const) process.on(signal, () => child.kill(signal));
  process.on('SIGINT', () => {});
  child.on('exit', (code, signal) => process.exit(signal ? 128 + os.constants.signals[signal] : (code ?? 1)));
} else {
  console.log(`bgcut-launch: starting ${script} on the system malloc: ${choice.reason}; ${heapText}`);
  process.argv = [process.argv[0]!, path.resolve(script), ...args];
  // Before the app's first use of libuv's pool, which is when libuv reads it.
  Object.assign(process.env, libuvPoolEnv());
  await import(pathToFileURL(path.resolve(script)).href);
}
