/**
 * The inference thread's mask memory (src/core/inference/inference-thread-worker.ts keeps it in a
 * WarmSpares, src/core/image/warm-memory.ts): a spare made between calls serves the next mask of
 * its size, zeroed as fresh memory is; any other size, or one over the bound, takes fresh memory;
 * a new size with no room left takes the room of the old.
 */
import { describe, expect, it } from 'vitest';
import { kernelCalls } from '../../src/core/image/kernel-calls.js';
import { WarmSpares } from '../../src/core/image/warm-memory.js';

const zeros = (n: number) => new Uint8Array(n);
const MASK_BOUND = 16 * 1024 * 1024;
/** The spares taken since `from` (the thread reports this count as masksReady). */
const takenSince = (from: number) => (kernelCalls.warmSpareTaken ?? 0) - from;
/** A call's mask: its memory taken, then, after the call, the refill for the next. */
const call = (memory: WarmSpares, bytes: number) => {
  const mask = memory.take('shared', bytes);
  memory.refill();
  return mask;
};

describe('WarmSpares as the inference thread mask memory', () => {
  it('serves the next mask of the size the call before took from the spare, zeroed, and only once', () => {
    const memory = new WarmSpares(MASK_BOUND);
    const start = kernelCalls.warmSpareTaken ?? 0;
    call(memory, 1 << 20);
    expect(takenSince(start)).toBe(0);
    const first = memory.take('shared', 1 << 20);
    expect(first).toBeInstanceOf(SharedArrayBuffer);
    expect(first.byteLength).toBe(1 << 20);
    expect(Buffer.compare(new Uint8Array(first), zeros(1 << 20))).toBe(0);
    expect(takenSince(start)).toBe(1);
    // The spare went with the first: the second is fresh (not the same memory handed out twice).
    const second = memory.take('shared', 1 << 20);
    expect(second).not.toBe(first);
    expect(takenSince(start)).toBe(1);
  });

  it('gives fresh memory for another size, and keeps the spare for its own', () => {
    const memory = new WarmSpares(MASK_BOUND);
    call(memory, 4096 * 3);
    const start = kernelCalls.warmSpareTaken ?? 0;
    const other = memory.take('shared', 4096 * 2);
    expect(other.byteLength).toBe(4096 * 2);
    expect(takenSince(start)).toBe(0);
    expect(memory.take('shared', 4096 * 3).byteLength).toBe(4096 * 3);
    expect(takenSince(start)).toBe(1);
  });

  it('keeps no spare over its bound, nor for an empty mask', () => {
    const memory = new WarmSpares(8192);
    const start = kernelCalls.warmSpareTaken ?? 0;
    call(memory, 8193);
    expect(memory.heldBytes).toBe(0);
    expect(memory.take('shared', 8193).byteLength).toBe(8193);
    call(memory, 0);
    expect(memory.take('shared', 0).byteLength).toBe(0);
    expect(takenSince(start)).toBe(0);
  });

  it('a mask of a new size with no room left is made again at that size, the old one dropped', () => {
    const memory = new WarmSpares(3 * 4096);
    call(memory, 2 * 4096);
    expect(memory.heldBytes).toBe(2 * 4096);
    call(memory, 3 * 4096); // a new model's size: 2 + 3 pages do not fit, the old spare goes
    expect(memory.heldBytes).toBe(3 * 4096);
    const start = kernelCalls.warmSpareTaken ?? 0;
    memory.take('shared', 2 * 4096);
    expect(takenSince(start)).toBe(0);
    memory.take('shared', 3 * 4096);
    expect(takenSince(start)).toBe(1);
  });

  it('a spare of an odd size (not whole pages) is zeroed to its last byte', () => {
    const memory = new WarmSpares(MASK_BOUND);
    call(memory, 10_001);
    const mask = new Uint8Array(memory.take('shared', 10_001));
    expect(mask.length).toBe(10_001);
    expect(mask.every((v) => v === 0)).toBe(true);
  });
});
