import { v8Collector } from './collector.js';

/**
 * Collects this thread's young generation (a scavenge: a fraction of a millisecond when little of
 * it is alive), after a step of a request that leaves large short-lived buffers behind: the
 * upload's socket chunks, grpc-js's framed copy of the model's message and the answer's receive
 * buffers, which this code cannot free itself (util/release-now.ts frees the ones it owns).
 *
 * Why: the host's main thread allocates little JavaScript, so V8 collects it rarely, and then
 * because its Buffers' memory grew by 64 MB since the last full collection; a burst of large
 * uploads kept up to that much dead memory resident beside the live (docs/benchmarks.md, "Memory:
 * what holds it"). A scavenge frees every buffer that died young, and costs far less of the event
 * loop than the full collection that would otherwise come. Where V8's collector cannot be had,
 * nothing is done.
 */
export let youngCollections = 0;

export function collectYoungGarbage(): void {
  const gc = v8Collector();
  if (!gc) return;
  gc({ type: 'minor' });
  youngCollections++;
}
