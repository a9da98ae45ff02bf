import { countKernel } from './kernel-calls.js';

/**
 * One buffer a thread lends again and again for a full-size temporary that dies before the
 * next one is made (the RGBA the fast PNG encoder copies: output.ts). A fresh buffer of a few MB
 * costs a page fault per 4 kB on its first write (buffers this large are mmap'd: the API runs
 * with MALLOC_MMAP_THRESHOLD_, runtime/allocator.ts), about 0.65 ms per MB, where a reused one
 * costs nothing: 2.5-3 ms per 1 MP cutout; and it spares the collector a dead buffer per render.
 * The contents are whatever the last borrower left: a borrower writes every byte it reads.
 * Counted (kernel-calls.ts): `<counter>Reused` and `<counter>Fresh` (`scratchReused`,
 * `scratchFresh` for the RGBA's).
 */
export class Scratch {
  private memory: Buffer = Buffer.alloc(0);
  private lent = false;

  /**
   * `keepBytes`: the largest buffer kept between loans (larger loans get a fresh one, dropped
   * after). `counter`: the name its loans are counted under.
   */
  constructor(
    readonly keepBytes: number,
    private readonly counter = 'scratch',
  ) {}

  /**
   * `bytes` bytes (contents undefined) and the function that gives them back. A fresh buffer
   * when the kept one is lent already (two renders interleaved at an await) or `bytes` is over
   * `keepBytes`.
   */
  take(bytes: number): { buffer: Buffer; release: () => void } {
    if (this.lent || bytes > this.keepBytes) {
      countKernel(`${this.counter}Fresh`);
      return { buffer: Buffer.allocUnsafeSlow(bytes), release: () => {} };
    }
    if (this.memory.length < bytes) {
      countKernel(`${this.counter}Fresh`);
      this.memory = Buffer.allocUnsafeSlow(bytes);
    } else {
      countKernel(`${this.counter}Reused`);
    }
    this.lent = true;
    let returned = false;
    return {
      buffer: this.memory.length === bytes ? this.memory : this.memory.subarray(0, bytes),
      release: () => {
        if (returned) return;
        returned = true;
        this.lent = false;
      },
    };
  }
}
