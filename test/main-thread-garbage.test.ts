import { afterAll, describe, expect, it } from 'vitest';
import { PixelPool } from '../src/core/image/pixel-pool.js';
import { gcFunction } from '../src/core/image/render-garbage.js';

/**
 * `mainThreadGcBytes` (main-thread-garbage.ts): once that many bytes of pool results have come
 * back to this thread since V8's last full collection, the thread collects, and results nobody
 * holds any more are gone without waiting for V8's own collection (64 MB later). Each result
 * here is a 2000x2000 mask (4 MB, pool.upscaleMask); what is asserted is what is still held.
 */
const MB = 1_048_576;
const SIDE = 2000;
const small = Buffer.alloc(256 * 256, 200);
const tick = () => new Promise((resolve) => setTimeout(resolve, 50));

const on = new PixelPool({ threads: 1, mainThreadGcBytes: 10 * MB });
const off = new PixelPool({ threads: 1 });
afterAll(() => Promise.all([on.close(), off.close()]));

/** One 4 MB result dropped at once: only a WeakRef to it is kept. */
async function dropped(pool: PixelPool): Promise<WeakRef<Buffer>> {
  const mask = await pool.upscaleMask(small, 256, 256, SIDE, SIDE);
  expect(mask.length).toBe(SIDE * SIDE);
  return new WeakRef(mask);
}

describe('the main thread collects the dead buffers pool results leave', () => {
  it('collects once 10 MB of results came back, and the dropped results are gone', async () => {
    // Start counting from a full collection (as after V8's own).
    gcFunction()!();
    await tick();
    const before = on.collector.collections;
    const refs = [await dropped(on), await dropped(on)];
    await tick();
    // 8 MB: not yet.
    expect(on.collector.collections).toBe(before);
    refs.push(await dropped(on));
    await tick();
    expect(on.collector.collections).toBe(before + 1);
    expect(refs.map((ref) => ref.deref() === undefined)).toEqual([true, true, true]);
  });

  it("counts again from V8's own full collections", async () => {
    gcFunction()!();
    await tick();
    const before = on.collector.collections;
    await dropped(on);
    await dropped(on);
    // A full collection not its own (as V8's would be): the 8 MB counted so far are behind it.
    gcFunction()!();
    await tick();
    await dropped(on);
    await tick();
    expect(on.collector.collections).toBe(before);
  });

  it('leaves collection to V8 when the option is 0 (the default)', async () => {
    for (let i = 0; i < 4; i++) await dropped(off);
    await tick();
    expect(off.collector.collections).toBe(0);
  });
});
