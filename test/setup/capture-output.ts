import { captureOutput, TEE_MARKER } from '../helpers/log-capture.js';

captureOutput(`${TEE_MARKER} ${process.pid}\n`);

// Tee everything written to stdout and stderr by this test process (console included) into the
// capture file that the global teardown scans for API keys.
for (const stream of [process.stdout, process.stderr]) {
  const write = stream.write.bind(stream) as (...args: unknown[]) => boolean;
  stream.write = ((chunk: unknown, ...rest: unknown[]) => {
    captureOutput(typeof chunk === 'string' ? chunk : Buffer.from(chunk as Uint8Array).toString());
    return write(chunk, ...rest);
  }) as typeof stream.write;
}
for (const level of ['log', 'info', 'warn', 'error', 'debug'] as const) {
  const original = console[level].bind(console);
  console[level] = (...args: unknown[]) => {
    captureOutput(`${args.map((a) => (typeof a === 'string' ? a : JSON.stringify(a, (_k, v) => (v instanceof Error ? `${v.name}: ${v.message} ${v.stack}` : v)))).join(' ')}\n`);
    original(...args);
  };
}
