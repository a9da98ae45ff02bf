/**
 * Memory for the model-input step's large buffers, faulted in before the request that uses it.
 *
 * Why: the model-input step (model-input.ts, in a pixel worker) writes two model-size buffers
 * that leave its thread, so they cannot be reused: the model-size image (moved to the render)
 * and the ModelInfer message (moved to the inference thread). Each was a fresh ArrayBuffer, and
 * under the API's malloc tuning (runtime/allocator.ts: every block over 256 KiB mapped on its
 * own) a fresh buffer faults in every page on its first write: about 770 faults, 2 ms, per 3 MB
 * buffer on the critical path of a lone 1 MP request (docs/benchmarks-history.md, "Ninth round: decode
 * and model input"). A worker that has just rendered a lone request (its last task) makes the
 * next buffers of the sizes its model inputs took, and touches one byte per page, while the
 * answer goes out and the next upload comes in; the next request takes them already mapped. The
 * faults are the same in number (the CPU per request does not change); they leave the request's
 * critical path. (Made right after the model input instead, while the model runs, they took the
 * same time off the decode but added it to the model call on a 2-core host, where no core was
 * idle then.)
 *
 * Spares are made only after a lone request (pixel-pool.ts says so when the whole pool is idle):
 * under load no core is idle to fault them in, and memory would be held between tasks that the
 * allocations they replace do not hold. Any task takes a spare that is there, so none made is
 * wasted (its faults are those the next allocation of that size would have taken). One spare per
 * kind and size, at most `maxBytes` in all per worker. A spare reads as zeros, as a fresh buffer does.
 *
 * The inference thread (core/inference/inference-thread-worker.ts) keeps its masks' memory here
 * too: every mask needs a SharedArrayBuffer of its own (the main thread and the render's worker
 * keep it after the call), and a fresh one's pages were zero-filled and mapped one by one as the
 * mask was read into it: on the 2-core box the read of a 1 MiB mask from its slot took 0.9 ms on
 * the call's path against 0.3 ms for the server's write of it (docs/inference-server.md, "Ninth
 * round"). After each call, off its path, it refills: the next mask of that size is read into
 * memory already mapped.
 *
 * A size no longer asked for does not hold the room: a refill that lacks room for a size taken
 * since the last one drops the spares of sizes not taken since (a mask of a new model's size is
 * made again at that size, and the old one goes).
 */
import { countKernel } from './kernel-calls.js';

/** `own`: an ArrayBuffer (movable to another thread); `shared`: a SharedArrayBuffer. */
export type SpareKind = 'own' | 'shared';

/** Page size the touch assumes: the smallest in use (x86-64, most arm64); larger pages are touched more than once. */
const PAGE_BYTES = 4096;

export class WarmSpares {
  private readonly spares = new Map<string, ArrayBuffer | SharedArrayBuffer>();
  /** Kinds and sizes taken since the last refill: what the next request will ask for again. */
  private readonly taken = new Map<string, { kind: SpareKind; length: number }>();
  private held = 0;

  constructor(readonly maxBytes: number) {
    if (!Number.isInteger(maxBytes) || maxBytes < 0) throw new RangeError('maxBytes must be a non-negative integer');
  }

  /**
   * `length` zeroed bytes of `kind`: the warm spare of that size when there is one (counted
   * `warmSpareTaken`), else fresh memory (`warmSpareMissed`). Either way the size is remembered
   * for the next refill.
   */
  take(kind: 'own', length: number): ArrayBuffer;
  take(kind: 'shared', length: number): SharedArrayBuffer;
  take(kind: SpareKind, length: number): ArrayBuffer | SharedArrayBuffer {
    const key = `${kind}:${length}`;
    this.taken.set(key, { kind, length });
    const spare = this.spares.get(key);
    if (spare) {
      this.spares.delete(key);
      this.held -= length;
      countKernel('warmSpareTaken');
      return spare;
    }
    countKernel('warmSpareMissed');
    return fresh(kind, length);
  }

  /**
   * Makes a spare, faulted in, for each kind and size taken since the last refill that has none,
   * while the total kept stays within maxBytes. Call it when the thread is otherwise idle.
   */
  refill(): void {
    countKernel('warmSpareRefills');
    for (const [key, { kind, length }] of this.taken) {
      if (this.spares.has(key) || length === 0 || length > this.maxBytes) continue;
      if (this.held + length > this.maxBytes) this.dropUntaken();
      if (this.held + length > this.maxBytes) continue;
      const memory = fresh(kind, length);
      touch(memory);
      this.spares.set(key, memory);
      this.held += length;
    }
    this.taken.clear();
  }

  /** Drops the spares of kinds and sizes not taken since the last refill: the room goes to those asked for again. */
  private dropUntaken(): void {
    for (const [key, spare] of this.spares) {
      if (this.taken.has(key)) continue;
      this.spares.delete(key);
      this.held -= spare.byteLength;
    }
  }

  /** Bytes kept in spares now. */
  get heldBytes(): number {
    return this.held;
  }
}

function fresh(kind: SpareKind, length: number): ArrayBuffer | SharedArrayBuffer {
  return kind === 'own' ? new ArrayBuffer(length) : new SharedArrayBuffer(length);
}

/** One write per page maps it (a read would map the shared zero page only); zeros keep it reading as fresh memory. */
function touch(memory: ArrayBuffer | SharedArrayBuffer): void {
  const bytes = new Uint8Array(memory);
  for (let i = 0; i < bytes.length; i += PAGE_BYTES) bytes[i] = 0;
}
