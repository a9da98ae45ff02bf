import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** `npm start` (dist/examples/start.js) as a child process, on a given data folder. */
export interface ExampleProcess {
  url: string;
  /** The demo key it printed (only ever compared, never printed by the tests). */
  demoKey: string;
  email: string;
  password: string;
  /** Its stdout and stderr so far (holds the demo key: compare, never print). */
  output(): string;
  /** The reader of its stdout goes away (as `npm start | head -1` once head exits): its next stdout write fails with EPIPE. */
  closeStdout(): void;
  /** SIGKILL (a test's clean-up when SIGTERM found it hung). */
  kill(): void;
  /** SIGTERM, as a person pressing Ctrl+C; resolves with the exit code once it has shut down. */
  stop(): Promise<number | null>;
}

const SCRIPT = fileURLToPath(new URL('../../dist/examples/start.js', import.meta.url));

/**
 * Starts the example app against an inference server that is already running
 * (BGCUT_INFERENCE_ADDRESS), on a free port, with its key file in `dataDir`. Its output is kept
 * here and not echoed: it prints the demo key and password by design.
 */
export function startExampleProcess(dataDir: string, inferenceAddress: string): Promise<ExampleProcess> {
  const child = spawn(process.execPath, [SCRIPT], {
    env: { ...process.env, PORT: '0', REDIS_URL: '', BGCUT_INFERENCE_ADDRESS: inferenceAddress, BGCUT_KEYS_FILE: `${dataDir}/keys.json`, BGCUT_DASHBOARD_SECRET: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      log += chunk.toString();
      const url = /bgcut listening on (http:\/\/\S+)/.exec(log)?.[1];
      const demoKey = /demo key: (bgk_\w+)/.exec(log)?.[1];
      const signIn = /sign in as (\S+) \/ (\S+)\)/.exec(log);
      if (url && demoKey && signIn) {
        child.stdout!.off('data', onData);
        child.stdout!.on('data', (more: Buffer) => (log += more.toString()));
        resolve({
          url,
          demoKey,
          email: signIn[1]!,
          password: signIn[2]!,
          output: () => log,
          closeStdout: () => child.stdout!.destroy(),
          kill: () => void child.kill('SIGKILL'),
          stop: async () => {
            if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
            return exited;
          },
        });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (chunk: Buffer) => (log += chunk.toString()));
    void exited.then((code) => reject(new Error(`the example app exited with ${code} before listening:\n${log.replace(/bgk_\w+/g, 'bgk_…')}`)));
  });
}
