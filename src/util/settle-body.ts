import type { Readable } from 'node:stream';

/**
 * A request answered before its body was read (refused, or an upload over a limit): read and
 * discard the rest so the client, still sending, gets to read the answer on a live connection,
 * but stop once it has sent more than any valid request could, by closing the connection.
 */
export function settleBody(body: Readable, capBytes: number): void {
  if (body.readableEnded || body.destroyed) return;
  let discarded = 0;
  const onData = (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > capBytes) {
      body.off('data', onData);
      body.destroy();
    }
  };
  body.on('data', onData);
  body.on('error', () => {});
  body.resume();
}
