import { countKernel } from './kernel-calls.js';

/**
 * Model-size buffers that several pixel-pool tasks read (the model's view of the image, the mask
 * on the model's grid) are kept in shared memory: a SharedArrayBuffer crosses to a worker as it
 * is, where an ordinary buffer is copied on the host's main thread for every task it goes to
 * (pixel-pool.ts's Parcel). One copy here, made once (in a worker where the buffer is made
 * there), replaces one per hand-off.
 */
export function isShared(bytes: Uint8Array): boolean {
  return bytes.buffer instanceof SharedArrayBuffer;
}

/** A new buffer of `length` bytes in shared memory of its own (zeroed). */
export function sharedBuffer(length: number): Buffer {
  return Buffer.from(new SharedArrayBuffer(length));
}

/** `bytes` in shared memory of its own: as it is when already shared, else one copy (counted: kernel-calls.ts). */
export function sharedCopy(bytes: Buffer): Buffer {
  if (bytes.length === 0 || isShared(bytes)) return bytes;
  countKernel('sharedCopy');
  const copy = sharedBuffer(bytes.length);
  bytes.copy(copy);
  return copy;
}

/**
 * Shared memory a pixel worker takes back once a request is done with it and hands out again,
 * for a buffer made every request at the same size: a 1 MP photo's full-size decode (3 MB),
 * copied into shared memory after each model-input decode and dead after its render. A fresh
 * SharedArrayBuffer of that size is mapped anew and faults in every page on its first write
 * under the API's malloc tuning (runtime/allocator.ts: blocks over 256 KiB mapped on their own),
 * ~2 ms of CPU per 1 MP request, and is one more dead buffer for the collector. At most
 * `maxBytes` are kept, so a large image's memory is never held: a buffer that does not fit is
 * left to the collector as before. Counted (kernel-calls.ts): `sharedPoolReused`, `sharedPoolFresh`.
 */
export class SharedPool {
  private free: SharedArrayBuffer[] = [];
  private held = 0;

  constructor(readonly maxBytes: number) {}

  /** `bytes` in shared memory (as sharedCopy): in a kept buffer of exactly its length when there is one. */
  copy(bytes: Buffer): Buffer {
    if (bytes.length === 0 || isShared(bytes)) return bytes;
    const i = this.free.findIndex((memory) => memory.byteLength === bytes.length);
    if (i < 0) {
      countKernel('sharedPoolFresh');
      return sharedCopy(bytes);
    }
    const memory = this.free.splice(i, 1)[0]!;
    this.held -= memory.byteLength;
    countKernel('sharedPoolReused');
    const out = Buffer.from(memory);
    bytes.copy(out);
    return out;
  }

  /**
   * `length` bytes of shared memory (contents undefined: a borrower writes every byte it reads):
   * a kept buffer of exactly that length when there is one, else a fresh one.
   */
  take(length: number): Buffer {
    const i = this.free.findIndex((memory) => memory.byteLength === length);
    if (i < 0 || length === 0) {
      countKernel('sharedPoolFresh');
      return sharedBuffer(length);
    }
    const memory = this.free.splice(i, 1)[0]!;
    this.held -= memory.byteLength;
    countKernel('sharedPoolReused');
    return Buffer.from(memory);
  }

  /**
   * Takes back the memory of `bytes`, which nothing may read or write any more (the caller's
   * word: every other handle to it, in any thread, is dead): only shared memory it covers
   * whole, and only while the kept total stays within maxBytes.
   */
  giveBack(bytes: Uint8Array | undefined): void {
    if (!bytes || !(bytes.buffer instanceof SharedArrayBuffer)) return;
    const memory = bytes.buffer;
    if (bytes.byteOffset !== 0 || bytes.byteLength !== memory.byteLength || memory.byteLength === 0) return;
    if (this.held + memory.byteLength > this.maxBytes) return;
    this.free.push(memory);
    this.held += memory.byteLength;
  }

  /** Drops every kept buffer (left to the collector). */
  clear(): void {
    this.free = [];
    this.held = 0;
  }

  /** Bytes kept now. */
  get heldBytes(): number {
    return this.held;
  }
}
