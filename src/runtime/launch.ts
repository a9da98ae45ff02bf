#!/usr/bin/env node
/**
 * bgcut-launch <script.js> [args...]: runs a Node app (the API) on jemalloc when the machine has
 * it (see allocator.ts), by starting it again as a child with LD_PRELOAD set; otherwise runs it
 * in this process as it is, after logging why. Signals are passed on to the child, and its exit
 * code is this process's. `npm start` goes through it.
 */
import { spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { chooseAllocator } from './allocator.js';

const [script, ...args] = process.argv.slice(2);
if (!script) {
  console.error('usage: bgcut-launch <script.js> [args...]');
  process.exit(2);
}

const choice = chooseAllocator();
if (choice.preload !== null) {
  console.log(`bgcut-launch: starting ${script} on jemalloc (${choice.preload})`);
  const child = spawn(process.execPath, [...process.execArgv, script, ...args], {
    stdio: 'inherit',
    // BGCUT_PRELOADED tells the app which preload is the launcher's, so it can leave it out of
    // the processes it starts itself (the inference server keeps the system malloc).
    env: { ...process.env, LD_PRELOAD: choice.preload, BGCUT_PRELOADED: choice.preload },
  });
  // SIGTERM and SIGHUP (from a supervisor, to this pid) are passed on; Ctrl-C's SIGINT reaches
  // the child from the terminal itself, so this process only waits for the child to end.
  for (const signal of ['SIGTERM', 'SIGHUP'] as const) process.on(signal, () => child.kill(signal));
  process.on('SIGINT', () => {});
  child.on('exit', (code, signal) => process.exit(signal ? 128 + os.constants.signals[signal] : (code ?? 1)));
} else {
  console.log(`bgcut-launch: starting ${script} on the system malloc: ${choice.reason}`);
  process.argv = [process.argv[0]!, path.resolve(script), ...args];
  await import(pathToFileURL(path.resolve(script)).href);
}
