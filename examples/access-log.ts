/**
 * The example's access log: one JSON line per response on stdout, written without holding the
 * event loop. `console.log` writes to a pipe or a file synchronously: on a busy box one line
 * held the API's loop 9.4 ms (`npm run bench -- --only host --host-attribution DIR`), and a
 * health check every 20 ms writes fifty lines a second. sonic-boom (pino's writer) gathers the
 * lines and writes them from libuv's thread pool, one write at a time, in order.
 *
 * When stdout's reader goes away (`npm start | head -1`, a log shipper that exits), a write fails
 * with EPIPE. An 'error' with no listener would end the whole API; instead the log stops (its
 * lines have nowhere to go), says so once on stderr, and the API keeps serving.
 */
import sonicBoom from 'sonic-boom';
import type { AccessLogEntry } from '../src/core/index.js';

// A CommonJS package whose named export Node's ES module loader does not see.
const { SonicBoom } = sonicBoom;
type SonicBoom = InstanceType<typeof SonicBoom>;

let out: SonicBoom | undefined;
/** Set once stdout is seen broken: no more lines are gathered. */
let stopped = false;

function stream(): SonicBoom | undefined {
  if (stopped) return undefined;
  if (!out) {
    out = new SonicBoom({ fd: process.stdout.fd, sync: false });
    out.on('error', stopLogging);
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

function onStdoutError(error: NodeJS.ErrnoException): void {
  if (error.code !== 'EPIPE') throw error;
  stopLogging(error);
}
// The example's own stdout lines (console.log at start and shutdown) meet the same broken pipe,
// whether or not an access-log line found it first.
process.stdout.on('error', onStdoutError);

/** Stops the log for good: what is gathered is dropped, later lines are not written. */
function stopLogging(error: NodeJS.ErrnoException): void {
  if (stopped) return;
  stopped = true;
  const broken = out;
  out = undefined;
  // sonic-boom's close leaves fds 1 and 2 open; its own 'error' listener stays, for what is in flight.
  broken?.destroy();
  try {
    process.stderr.write(`access log: stdout failed (${error.code ?? error.message}); access-log lines are no longer written, the API keeps serving\n`);
  } catch {
    // stderr gone too: nothing more to say.
  }
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
  stream()?.write(`${JSON.stringify({ at: new Date().toISOString(), ...entry })}\n`);
}
