import type { ChildProcess } from 'node:child_process';

/**
 * Waiting for a process a bench started: the API (examples print "listening") and the inference
 * server ("listening on HOST:PORT" and "all ready in N ms" once its models are loaded). Rejects
 * with the process's output if it exits first.
 */
export function untilApiListening(child: ChildProcess): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('listening')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`API exited with ${code}`)));
  });
}

/** The port of an inference server started with `--port 0`, once every model is ready (stdout and stderr piped). */
export function untilInferenceServerReady(child: ChildProcess, name = 'server'): Promise<number> {
  let log = '';
  return new Promise<number>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      log += chunk.toString();
      const listening = /listening on [^\s]+:(\d+)/.exec(log);
      if (listening && /all ready in \d+ ms/.test(log)) resolve(Number(listening[1]));
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`${name} exited with ${code}:\n${log}`)));
  });
}
