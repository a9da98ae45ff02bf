import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { captureOutput } from './log-capture.js';

// From test/helpers (vitest) the build is in ../../dist; from dist/test/helpers (bench) it is ../../bench.
const SCRIPT = ['../../dist/bench/stress-api.js', '../../bench/stress-api.js']
  .map((relative) => fileURLToPath(new URL(relative, import.meta.url)))
  .find((file) => existsSync(file) && file.endsWith('.js'))!;

export interface ApiProcess {
  baseUrl: string;
  child: ChildProcess;
  output(): string;
  /** Resident memory of the process, in bytes (Linux). */
  rss(): number;
  /** Open file descriptors of the process (sockets, files, pipes): its handles, seen from outside. */
  fds(): number;
  /** Resolves with the exit code. */
  exited: Promise<number | null>;
  stop(): Promise<void>;
}

/** bench/stress-api.ts (or another built script that prints `listening <port>`) as a child process (see there for the environment it reads). */
export function startApiProcess(env: Record<string, string>, script = SCRIPT): Promise<ApiProcess> {
  const child = spawn(process.execPath, [script], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      captureOutput(chunk.toString());
      log += chunk.toString();
      const port = /listening (\d+)/.exec(log)?.[1];
      if (port) {
        child.stdout!.off('data', onData);
        child.stdout!.on('data', (c: Buffer) => {
          captureOutput(c.toString());
          log += c.toString();
        });
        resolve({
          baseUrl: `http://127.0.0.1:${port}`,
          child,
          output: () => log,
          rss: () => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1] ?? 0) * 1024,
          fds: () => readdirSync(`/proc/${child.pid}/fd`).length,
          exited,
          stop: async () => {
            if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
            await exited;
          },
        });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (chunk: Buffer) => {
      captureOutput(chunk.toString());
      log += chunk.toString();
    });
    void exited.then((code) => reject(new Error(`API process exited with ${code} before listening:\n${log}`)));
  });
}
