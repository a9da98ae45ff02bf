import { MessageChannel, type MessagePort } from 'node:worker_threads';

/**
 * Gives a buffer's memory back now instead of at V8's next garbage collection, for large buffers
 * that the caller alone holds and is done with (a tensor message once its call settled, a
 * response body once it was written).
 *
 * Why: the host's main thread allocates little JavaScript, so V8 collects it rarely, and then
 * because its external memory (Buffers' bytes) grew by 64 MB since the last collection. Dead
 * Buffers of finished requests (tensor messages, encoded images) therefore stayed resident, up
 * to 64 MB of them, beside the live ones (docs/benchmarks.md, "Memory: what holds it").
 * Collecting on the host's event loop would block it; this does not: the buffer's ArrayBuffer is
 * moved (transferred, no copy) into a message on a port whose other end is closed, which detaches
 * it here (its views read as empty from then on) and drops the message, freeing the memory.
 *
 * Only a buffer that has its ArrayBuffer to itself (the whole length but for `slack` bytes, such
 * as a message's alignment padding; not shared memory, not one of Node's pooled small buffers)
 * and at least {@link RELEASE_MIN_BYTES} long is released; anything else is left to the collector
 * as before. Returns whether it was released.
 */
export const RELEASE_MIN_BYTES = 64 * 1024;

let port: MessagePort | undefined;

function closedPort(): MessagePort {
  if (!port) {
    const channel = new MessageChannel();
    channel.port2.close();
    channel.port1.unref();
    port = channel.port1;
  }
  return port;
}

export function releaseNow(bytes: Uint8Array | undefined, slack = 0): boolean {
  if (!bytes) return false;
  const memory = bytes.buffer;
  if (!(memory instanceof ArrayBuffer) || memory.byteLength - bytes.byteLength > slack || memory.byteLength < RELEASE_MIN_BYTES) return false;
  try {
    closedPort().postMessage(null, [memory]);
  } catch {
    // Not movable (an ArrayBuffer that native code made and keeps, or one marked untransferable).
    return false;
  }
  return memory.byteLength === 0;
}
