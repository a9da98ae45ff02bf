import { constants, PerformanceObserver } from 'node:perf_hooks';
import { gcFunction } from './render-garbage.js';

/**
 * A full garbage collection of the host's thread once `everyBytes` of image buffers have reached
 * it from the pixel pool since V8's last full collection there (opt-in: `mainThreadGcBytes`,
 * off by default, `npm start` included). Each 12 MP request leaves about 17 MB of dead Buffers on the main
 * thread (its upload's socket chunks, the model call's message and grpc-js's framed copy, the
 * model-size image and mask, the encoded image), outside V8's heap: V8 collects them only once
 * 64 MB more such memory is held than after its last full collection, so up to 64 MB of dead
 * buffers sit beside the live ones at the peak. Collecting at half that bounds them at about
 * half (16 x 12 MP: peak 282-291 MB against 335-336). The cost: this collection is V8's
 * forced one, marked and compacted in one pause on the event loop, where V8's own marks
 * incrementally and concurrently and pauses briefly: 127-430 ms per collection against V8's
 * 32-55 ms in the same burst (load ~26), twice as often. So it is off unless the host asks for
 * it (a memory-bound deployment that can afford those pauses). A young-generation collection
 * frees none of these (docs/benchmarks-history.md, "The main thread's dead buffers").
 *
 * Counted from the results the pool's tasks bring back (the buffers each result holds), which
 * arrive with the rest of a request's buffers; V8's own full collections (seen through the `gc`
 * performance entries) start the count again, so this never adds a collection right after one.
 */
export class MainThreadCollector {
  /** Full collections this collector ran (a test reads it). */
  collections = 0;
  private arrived = 0;
  private scheduled = false;
  private readonly observer: PerformanceObserver | undefined;

  constructor(readonly everyBytes: number) {
    if (everyBytes > 0) {
      this.observer = new PerformanceObserver((list) => {
        if (list.getEntries().some((entry) => (entry as { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR)) this.arrived = 0;
      });
      this.observer.observe({ entryTypes: ['gc'] });
    }
  }

  /** A task's result reached this thread: counts the bytes of the buffers it holds. */
  arrivedWith(value: unknown): void {
    if (!this.observer) return;
    this.arrived += bufferBytes(value, 2);
    if (this.arrived < this.everyBytes || this.scheduled) return;
    this.scheduled = true;
    // After the task's continuation has run: what it let go of is dead by then.
    setImmediate(() => {
      this.scheduled = false;
      if (this.arrived < this.everyBytes) return;
      const gc = gcFunction();
      if (!gc) return;
      gc();
      this.arrived = 0;
      this.collections++;
    });
  }

  close(): void {
    this.observer?.disconnect();
  }
}

/** The bytes of the buffers in `value`, its fields and (to `depth`) theirs. */
function bufferBytes(value: unknown, depth: number): number {
  if (ArrayBuffer.isView(value)) return value.byteLength;
  if (depth === 0 || value === null || typeof value !== 'object') return 0;
  let bytes = 0;
  for (const field of Object.values(value)) bytes += bufferBytes(field, depth - 1);
  return bytes;
}
