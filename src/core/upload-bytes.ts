import { releaseNow } from '../util/release-now.js';

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
 * The one buffer is memory of its own (an ArrayBuffer, not shared): a synchronous request's
 * upload is lent to the pixel pool's task that decodes it for the model (moved there and back,
 * no copy) and moved into its render, after which nothing on the host's main thread holds it;
 * or it is freed as the request ends (util/release-now.ts). It used to be shared memory, which
 * crosses to a worker without a copy too, but lives until *every* thread that saw it collected
 * its handle: the main thread's handle, old by the time the request ends, went only at that
 * thread's next full collection, so a burst's finished uploads (1.5 MB each at 12 MP) stayed
 * resident beside the live ones (docs/benchmarks-history.md, "Eighth round, memory").
 */
/** The ArrayBuffers UploadBytes made: a part's bytes from offset 0, and past them nothing anyone reads. */
const gathered = new WeakSet<ArrayBufferLike>();

/**
 * Whether `bytes` are an upload's as UploadBytes gathered them: from the start of memory made for
 * that one part, whose tail past them (the rest of the declared body) holds nothing; so the whole
 * memory can be moved or freed with them.
 */
export function isGatheredUpload(bytes: Uint8Array): boolean {
  return bytes.byteOffset === 0 && gathered.has(bytes.buffer);
}

/** A gathered upload's memory moved back from a worker it was lent to (a new handle here): gathered still. */
export function gatheredAgain(bytes: Buffer): Buffer {
  if (bytes.byteOffset === 0 && bytes.buffer instanceof ArrayBuffer) gathered.add(bytes.buffer);
  return bytes;
}

export class UploadBytes {
  private buffer: Buffer | undefined;
  private chunks: Buffer[] = [];
  private filled = 0;

  /** `capacity`: the most bytes the part can have (the body's declared length), or 0 when unknown. */
  constructor(capacity: number) {
    if (capacity > 0) {
      // allocUnsafeSlow: not zeroed (its pages are touched only as the bytes arrive), not pooled.
      this.buffer = Buffer.allocUnsafeSlow(capacity);
      gathered.add(this.buffer.buffer);
    }
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

/**
 * Frees an upload's memory now (util/release-now.ts), for a caller whose upload it alone holds and
 * is done with (a synchronous request, as it ends): gathered memory whole, tail included, or a
 * buffer alone in its memory. Anything else (shared, a view into larger memory, already moved)
 * is left to the collector. Returns whether it was freed.
 */
export function releaseUpload(bytes: Uint8Array): boolean {
  return releaseNow(bytes, isGatheredUpload(bytes) ? Infinity : 0);
}
