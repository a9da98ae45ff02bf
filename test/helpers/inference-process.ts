import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { captureOutput } from './log-capture.js';

// From test/helpers (vitest) the build is in ../../dist; from dist/test/helpers (bench) it is ../../src.
const CLI = ['../../dist/src/inference-server/cli.js', '../../src/inference-server/cli.js']
  .map((relative) => fileURLToPath(new URL(relative, import.meta.url)))
  .find((file) => existsSync(file))!;

export interface InferenceProcess {
  port: number;
  address: string;
  /** Prometheus endpoint, when started with `--metrics-port`. */
  metricsUrl: string | undefined;
  child: ChildProcess;
  output: () => string;
  /** SIGTERM and wait for the process to end. */
  stop(): Promise<void>;
}

/**
 * Starts the built inference server (`npm test` builds first) as a real child process and
 * resolves once its model is loaded and warmed up.
 */
export function startInferenceProcess(
  args: string[] = [],
  env: Record<string, string> = {},
  /** Resolve once the port is bound, before the model has loaded. */
  until: 'ready' | 'listening' = 'ready',
): Promise<InferenceProcess> {
  const child = spawn(process.execPath, [CLI, '--port', '0', ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  return new Promise((resolve, reject) => {
    let port = 0;
    const onData = (chunk: Buffer) => {
      log += chunk.toString();
      const listening = /listening on [^\s]+:(\d+)/.exec(log);
      if (listening) port = Number(listening[1]);
      const metrics = /metrics on (http:\/\/[^\s]+\/metrics)/.exec(log);
      if (port && (until === 'listening' || /all ready in \d+ ms/.test(log))) {
        resolved = true;
        resolve({
          port,
          address: `127.0.0.1:${port}`,
          metricsUrl: metrics?.[1],
          child,
          output: () => log,
          stop: () =>
            new Promise<void>((done) => {
              if (child.exitCode !== null || child.signalCode !== null) return done();
              child.once('exit', () => done());
              child.kill('SIGTERM');
            }),
        });
      }
    };
    let resolved = false;
    const onDataOnce = (chunk: Buffer) => {
      captureOutput(chunk.toString());
      if (resolved) {
        log += chunk.toString();
        return;
      }
      onData(chunk);
    };
    child.stdout!.on('data', onDataOnce);
    child.stderr!.on('data', onDataOnce);
    child.once('exit', (code) => reject(new Error(`inference server exited with ${code} before it was ready:\n${log}`)));
  });
}
