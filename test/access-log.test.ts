import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, inject, it } from 'vitest';
import { startExampleProcess } from './helpers/example-process.js';

/**
 * The example's access log (examples/access-log.ts) writes its lines from libuv's thread pool,
 * not on the event loop. Checked by what runs where, not by time: in a child process whose stdout
 * is a pipe, logging lines makes no call of `process.stdout.write` (the stream's write, which
 * makes its write() system call on the main thread, as console.log does: on a busy box one line
 * held the API's loop 9.4 ms) nor of `fs.writeSync`, but asynchronous `fs.write` calls (run by the
 * thread pool); every line arrives, whole and in order. (Runs the built example: `npm test` builds first.)
 */
const ACCESS_LOG = fileURLToPath(new URL('../dist/examples/access-log.js', import.meta.url));
const LINES = 3000;

describe('example access log', () => {
  it('writes its lines with asynchronous fs.write calls, none through process.stdout.write or fs.writeSync, all of them in order', async () => {
    const script = `
      import fs from 'node:fs';
      const counts = { stdoutWrite: 0, writeSync: 0, write: 0 };
      const count = (target, name, key) => { const real = target[name]; target[name] = function (...args) { counts[key]++; return real.apply(this, args); }; };
      count(process.stdout, 'write', 'stdoutWrite');
      count(fs, 'writeSync', 'writeSync');
      count(fs, 'write', 'write');
      const { logAccess, closeAccessLog } = await import(${JSON.stringify(ACCESS_LOG)});
      for (let i = 0; i < ${LINES}; i++) {
        logAccess({ status: 200, seq: i, pad: 'x'.repeat(60) });
        // Some lines while a write is in flight, some after it is done.
        if (i % 500 === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      }
      const during = { ...counts };
      await closeAccessLog();
      process.stderr.write(JSON.stringify(during) + '\\n');
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const [code] = (await once(child, 'close')) as [number];
    expect(code, stderr).toBe(0);
    const counts = JSON.parse(stderr.trim().split('\n').at(-1)!) as { stdoutWrite: number; writeSync: number; write: number };
    expect({ stdoutWrite: counts.stdoutWrite, writeSync: counts.writeSync }).toEqual({ stdoutWrite: 0, writeSync: 0 });
    expect(counts.write).toBeGreaterThan(0);
    const lines = stdout.trim().split('\n').map((line) => JSON.parse(line) as { seq: number; status: number; at: string });
    expect(lines.map((l) => l.seq)).toEqual(Array.from({ length: LINES }, (_, i) => i));
  }, 90_000);

  it('keeps the example API serving when its stdout reader goes away (EPIPE on the log), says so once on stderr, and still shuts down with 0', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-log-pipe-'));
    const example = await startExampleProcess(dir, inject('inferenceAddress'));
    try {
      const models = async () => (await fetch(`${example.url}/v1/models`, { signal: AbortSignal.timeout(10_000) })).status;
      expect(await models()).toBe(200);
      // `npm start | head -1`: head has read its line and exits.
      example.closeStdout();
      // Each answer writes an access-log line; the first write after the close fails with EPIPE
      // (from the thread pool, a moment later): wait for the log to say it stopped.
      const notice = /access log: stdout failed \(EPIPE\)/g;
      for (let i = 0; i < 200 && !notice.test(example.output()); i++) {
        expect(await models()).toBe(200);
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      expect(example.output().match(notice)?.length, 'the stderr notice, once').toBe(1);
      // Still serving after the pipe broke, and more lines do not repeat the notice.
      for (let i = 0; i < 5; i++) expect(await models()).toBe(200);
      expect(example.output().match(notice)?.length).toBe(1);
      // Its shutdown message to the same broken stdout does not crash it either.
      expect(await example.stop()).toBe(0);
    } finally {
      example.kill();
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
