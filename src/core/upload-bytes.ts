/**
 * A file part's bytes, gathered as they arrive. When the body declares its length (the usual
 * Content-Length of a form of one file), each chunk is copied into one buffer of that size as it
 * comes: no single large copy at the end holds the host's event loop (joining a 12 MB photo's
 * chunks at once took 5-20 ms of the main thread on a loaded 2-core box, `npm run bench -- --only
 * host --host-attribution DIR`), and each socket chunk is let go as soon as it is copied. The
 * buffer is allocated but not touched ahead of the bytes, so memory grows only as they arrive.
 * Without a declared length, or if more bytes come than declared (an adapter whose headers do
 * not match its body), the chunks are kept and joined at the end, as before.
 *
 * The one buffer is shared memory (a SharedArrayBuffer): the upload is handed to the pixel pool's
 * workers for every task that decodes it (the model's input, the render), and a shared buffer
 * crosses to a worker without a copy, where an ordinary one is copied each time on the main
 * thread (piscina's postTask, 4-9 ms per hand-off of a 1.6 MB photo on a loaded box).
 */
export class UploadBytes {
  private buffer: Buffer | undefined;
  private chunks: Buffer[] = [];
  private filled = 0;

  /** `capacity`: the most bytes the part can have (the body's declared length), or 0 when unknown. */
  constructor(capacity: number) {
    if (capacity > 0) this.buffer = Buffer.from(new SharedArrayBuffer(capacity));
  }

  push(chunk: Buffer): void {
    if (this.buffer && this.filled + chunk.length <= this.buffer.length) {
      chunk.copy(this.buffer, this.filled);
    } else {
      if (this.buffer) {
        // More than declared: what is in the buffer becomes the first chunk.
        this.chunks.push(this.buffer.subarray(0, this.filled));
        this.buffer = undefined;
      }
      this.chunks.push(chunk);
    }
    this.filled += chunk.length;
  }

  get length(): number {
    return this.filled;
  }

  /** The bytes: a view of the one buffer, or the chunks joined. */
  bytes(): Buffer {
    return this.buffer ? this.buffer.subarray(0, this.filled) : Buffer.concat(this.chunks, this.filled);
  }
}
