/**
 * The inference thread's mask memory (src/core/inference/mask-memory.ts): a spare made between
 * calls serves the next mask of its size, zeroed as fresh memory is; any other size, or one over
 * the bound, takes fresh memory.
 */
import { describe, expect, it } from 'vitest';
import { MASK_SPARE_MAX_BYTES, MaskMemory } from '../../src/core/inference/mask-memory.js';

const zeros = (n: number) => new Uint8Array(n);

describe('MaskMemory', () => {
  it('serves the next mask of the prepared size from the spare, zeroed, and only once', () => {
    const memory = new MaskMemory();
    memory.prepare(1 << 20);
    const first = memory.take(1 << 20);
    expect(first).toBeInstanceOf(SharedArrayBuffer);
    expect(first.byteLength).toBe(1 << 20);
    expect(Buffer.compare(new Uint8Array(first), zeros(1 << 20))).toBe(0);
    expect(memory.ready).toBe(1);
    // The spare went with the first: the second is fresh (not the same memory handed out twice).
    const second = memory.take(1 << 20);
    expect(second).not.toBe(first);
    expect(memory.ready).toBe(1);
  });

  it('gives fresh memory for another size, and keeps the spare for its own', () => {
    const memory = new MaskMemory();
    memory.prepare(4096 * 3);
    const other = memory.take(4096 * 2);
    expect(other.byteLength).toBe(4096 * 2);
    expect(memory.ready).toBe(0);
    expect(memory.take(4096 * 3).byteLength).toBe(4096 * 3);
    expect(memory.ready).toBe(1);
  });

  it('keeps no spare over its bound, nor for an empty mask', () => {
    const memory = new MaskMemory(8192);
    memory.prepare(8193);
    expect(memory.take(8193).byteLength).toBe(8193);
    memory.prepare(0);
    expect(memory.take(0).byteLength).toBe(0);
    expect(memory.ready).toBe(0);
    expect(MASK_SPARE_MAX_BYTES).toBe(16 * 1024 * 1024);
  });

  it('a spare of an odd size (not whole pages) is zeroed to its last byte', () => {
    const memory = new MaskMemory();
    memory.prepare(10_001);
    const mask = new Uint8Array(memory.take(10_001));
    expect(mask.length).toBe(10_001);
    expect(mask.every((v) => v === 0)).toBe(true);
  });
});
