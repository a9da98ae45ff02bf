import type { Readable } from 'node:stream';

/**
 * Why a body could not be read:
 * - `already_read`: someone consumed the stream first (a host's body parser mounted ahead of
 *   bgcut); waiting for it would wait forever, so it is refused at once;
 * - `too_large`: over the cap, declared (Content-Length) or counted;
 * - `closed`: the stream ended without its end (the peer went away mid-body);
 * - `failed`: the stream errored.
 */
export type BodyReadFailure = 'already_read' | 'too_large' | 'closed' | 'failed';

export class BodyReadError extends Error {
  override readonly name = 'BodyReadError';
  constructor(
    readonly reason: BodyReadFailure,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** What an operator is told when a body parser got to the body first. */
export const BODY_ALREADY_READ_HELP =
  'The request body was read before bgcut got it: a body parser mounted ahead of bgcut (express.json(), express.urlencoded(), ' +
  'express.raw(), express.text(), multer, body-parser, or a Fastify content-type parser outside bgcut\'s plugin) consumed it. ' +
  "Mount bgcut's router before that parser, or limit the parser to your own routes.";

/**
 * True when the stream can no longer give us its body from the start: it ended, was destroyed,
 * or has already emitted data to someone else. Checked before listening, since a consumed stream
 * never emits 'end' again.
 */
export function bodyAlreadyRead(body: Readable): boolean {
  return body.readableEnded || body.destroyed || body.readable === false || body.readableDidRead;
}

export interface ReadBodyOptions {
  /** Most bytes accepted; one more and the read fails with `too_large`. */
  maxBytes: number;
  /** The declared Content-Length, if any: over `maxBytes` fails before a byte is read. */
  declaredLength?: string | number | undefined;
  /** Ends the read with the signal's reason (the client left, its time ran out). */
  signal?: AbortSignal | undefined;
}

/**
 * Reads a whole body of at most `maxBytes` into memory. Every way out (end, cap, close, error,
 * abort) removes its listeners and pauses the stream; what is left unread is the caller's to
 * drain or destroy (settleBody), so this never closes a connection on its own.
 *
 * Hand-written rather than `raw-body`: raw-body takes no AbortSignal and never settles when the
 * stream closes without an 'aborted' event (it only cleans up on 'close'), so it would need a
 * wrapper as long as this reader.
 */
/** Bodies of at least this declared length are written into one allocation as they arrive. */
const PREALLOCATE_FROM = 64 * 1024;

export function readBody(body: Readable, options: ReadBodyOptions): Promise<Buffer> {
  const { maxBytes, signal } = options;
  const tooLarge = () => new BodyReadError('too_large', `The body is larger than ${maxBytes} bytes.`);
  if (signal?.aborted) return Promise.reject(signal.reason);
  const declared = Number(options.declaredLength);
  if (options.declaredLength !== undefined && Number.isFinite(declared) && declared > maxBytes) return Promise.reject(tooLarge());
  if (bodyAlreadyRead(body)) return Promise.reject(new BodyReadError('already_read', BODY_ALREADY_READ_HELP));

  return new Promise<Buffer>((resolve, reject) => {
    let chunks: Buffer[] = [];
    let received = 0;
    // A large body of declared length is copied chunk by chunk, as it arrives, into memory of its
    // own: no copy of the whole body at its end (35 MB: about 27 ms on the event loop), and the
    // body can be moved to a worker as it is (removebg/read-request.ts). Untouched pages of the
    // allocation are not resident until the bytes arrive.
    let whole = Number.isSafeInteger(declared) && declared >= PREALLOCATE_FROM && declared <= maxBytes ? Buffer.allocUnsafeSlow(declared) : undefined;
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (received > maxBytes) finish(tooLarge());
      else if (whole && received <= whole.length) chunk.copy(whole, received - chunk.length);
      else {
        // More than declared (a stream with no HTTP parser under it): the chunks as they come.
        if (whole) chunks = [whole.subarray(0, received - chunk.length)];
        whole = undefined;
        chunks.push(chunk);
      }
    };
    const onEnd = () => finish();
    const onClose = () => finish(new BodyReadError('closed', 'The body ended early: the connection closed mid-body.'));
    const onError = (error: Error) => finish(new BodyReadError('failed', `The body could not be read: ${error.message}`, { cause: error }));
    const onAbort = () => finish(signal!.reason);

    function finish(error?: unknown): void {
      body.off('data', onData).off('end', onEnd).off('close', onClose).off('error', onError);
      signal?.removeEventListener('abort', onAbort);
      if (error === undefined) {
        resolve(whole ? (received === whole.length ? whole : whole.subarray(0, received)) : Buffer.concat(chunks));
        return;
      }
      body.pause();
      // A late error of a stream we stopped reading is nobody's to handle: keep it from crashing the process.
      body.on('error', () => {});
      reject(error);
    }

    signal?.addEventListener('abort', onAbort, { once: true });
    body.on('data', onData).on('end', onEnd).on('close', onClose).on('error', onError);
    body.resume();
  });
}
