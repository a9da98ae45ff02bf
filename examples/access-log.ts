/**
 * The example's access log: one JSON line per response on stdout, written without holding the
 * event loop. `console.log` writes to a pipe or a file synchronously: on a busy box one line
 * held the API's loop 9.4 ms (`npm run bench -- --only host --host-attribution DIR`), and a
 * health check every 20 ms writes fifty lines a second. sonic-boom (pino's writer) gathers the
 * lines and writes them from libuv's thread pool, one write at a time, in order.
 */
import sonicBoom from 'sonic-boom';
import type { AccessLogEntry } from '../src/core/index.js';

// A CommonJS package whose named export Node's ES module loader does not see.
const { SonicBoom } = sonicBoom;
type SonicBoom = InstanceType<typeof SonicBoom>;

let out: SonicBoom | undefined;

function stream(): SonicBoom {
  if (!out) {
    out = new SonicBoom({ fd: process.stdout.fd, sync: false });
    // What is still gathered when the process exits (process.exit after a graceful shutdown).
    process.once('exit', () => {
      try {
        out?.flushSync();
      } catch {
        // Nothing more can be done for a log line at exit.
      }
    });
  }
  return out;
}

/** Writes what is gathered and closes the log (graceful-shutdown.ts, before the process exits). */
export async function closeAccessLog(): Promise<void> {
  const closing = out;
  if (!closing) return;
  out = undefined;
  await new Promise<void>((resolve) => {
    closing.once('close', () => resolve());
    closing.once('error', () => resolve());
    closing.end();
  });
}

/** Writes one access-log line (the entry holds the key's short id, never the key). */
export function logAccess(entry: AccessLogEntry): void {
  stream().write(`${JSON.stringify({ at: new Date().toISOString(), ...entry })}\n`);
}
