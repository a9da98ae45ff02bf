/**
 * The shared memory the inference thread hands each mask to the main thread in
 * (inference-thread-worker.ts), made ready between calls instead of during them.
 *
 * Why: every mask needs a SharedArrayBuffer of its own (the main thread and the render's worker
 * keep it after the call), and a fresh one is a new mapping whose pages the kernel zero-fills and
 * maps one by one as the mask is read into it; the main thread rarely collects, so that memory is
 * never handed back warm. On the 2-core box the read of a 1 MiB mask from its slot took 0.9 ms on
 * the call's path against 0.3 ms for the server's write of it (docs/inference-server.md, "Ninth
 * round"). So after each call, off its path, the thread makes the next mask's memory and touches
 * each of its pages once; the next call of that size reads into memory already mapped.
 *
 * Bounded: one spare, and none for masks over MASK_SPARE_MAX_BYTES. A mask of another size takes
 * fresh memory as before, and the spare is made again at the new size.
 */

/** Largest mask kept ready (a 2048x2048 FP32 mask is 16 MiB). */
export const MASK_SPARE_MAX_BYTES = 16 * 1024 * 1024;
/** Pages are touched at this stride: one write per page maps it. */
const PAGE_BYTES = 4096;

export class MaskMemory {
  private spare: SharedArrayBuffer | undefined;
  /** Masks that found their memory ready (for tests). */
  ready = 0;

  constructor(private readonly maxBytes = MASK_SPARE_MAX_BYTES) {}

  /** Memory for a mask of `bytes`, zeroed: the spare when it has that size, else a fresh one. */
  take(bytes: number): SharedArrayBuffer {
    const spare = this.spare;
    if (spare && spare.byteLength === bytes) {
      this.spare = undefined;
      this.ready++;
      return spare;
    }
    return new SharedArrayBuffer(bytes);
  }

  /** After a call, off its path: a spare of `bytes` for the next, its pages mapped (a no-op when it is there already). */
  prepare(bytes: number): void {
    if (bytes <= 0 || bytes > this.maxBytes || this.spare?.byteLength === bytes) return;
    const spare = new SharedArrayBuffer(bytes);
    const view = new Uint8Array(spare);
    // A write of the zero it holds maps the page; the memory stays zeroed, as a fresh one is.
    for (let at = 0; at < bytes; at += PAGE_BYTES) view[at] = 0;
    this.spare = spare;
  }
}
