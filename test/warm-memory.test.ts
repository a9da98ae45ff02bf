import { afterAll, describe, expect, it } from 'vitest';
import { kernelCalls } from '../src/core/image/kernel-calls.js';
import { isFramed, prepareModelInput } from '../src/core/image/model-input.js';
import { renderOutput } from '../src/core/image/output.js';
import { probeImage, segment, type MaskModel } from '../src/core/image/pipeline.js';
import { PixelPool } from '../src/core/image/pixel-pool.js';
import { ISNET_PROFILE } from '../src/core/image/profile.js';
import { WarmSpares } from '../src/core/image/warm-memory.js';
import { DEFAULT_OUTPUT } from '../src/core/output-options.js';
import { DISC_RENDER, softDiscModel } from './helpers/disc-model.js';
import { objectOnTexture } from './helpers/synthetic-image.js';

/**
 * A lone request's model-size image and ModelInfer message are written into memory its worker
 * mapped after the previous lone request's render (warm-memory.ts), instead of fresh memory that
 * faults in every page on the decode's critical path. The bytes the model and the render get
 * must not change: asserted against the same step made in this thread with fresh memory (the
 * reference), and on the worker's counts of spares taken, not on time.
 */
const count = (name: string) => kernelCalls[name] ?? 0;

describe('WarmSpares', () => {
  it('hands out fresh memory until a refill, then the spare of that kind and size, zeroed', () => {
    const spares = new WarmSpares(1 << 20);
    const missed = count('warmSpareMissed');
    const first = spares.take('own', 100_000);
    expect(first).toBeInstanceOf(ArrayBuffer);
    expect(count('warmSpareMissed')).toBe(missed + 1);
    spares.take('shared', 50_000);
    spares.refill();
    expect(spares.heldBytes).toBe(150_000);

    const taken = count('warmSpareTaken');
    const own = spares.take('own', 100_000);
    const shared = spares.take('shared', 50_000);
    expect(count('warmSpareTaken')).toBe(taken + 2);
    expect(own).toBeInstanceOf(ArrayBuffer);
    expect(own).not.toBe(first);
    expect(shared).toBeInstanceOf(SharedArrayBuffer);
    expect(spares.heldBytes).toBe(0);
    // Touched to map its pages, yet it reads as fresh memory does.
    expect(new Uint8Array(own).every((b) => b === 0)).toBe(true);
    expect(new Uint8Array(shared).every((b) => b === 0)).toBe(true);
    // Another size is not served by a spare of a different one.
    spares.refill();
    spares.take('own', 99_999);
    expect(count('warmSpareTaken')).toBe(taken + 2);
  });

  it('keeps at most maxBytes, and only the sizes taken since the last refill', () => {
    const spares = new WarmSpares(300_000);
    spares.take('own', 200_000);
    spares.take('own', 150_000);
    spares.refill();
    expect(spares.heldBytes).toBe(200_000);
    // Nothing taken since: a refill adds nothing.
    spares.refill();
    expect(spares.heldBytes).toBe(200_000);
    expect(() => new WarmSpares(-1)).toThrow(RangeError);
  });
});

describe("a lone request's model input in warm spares", () => {
  const pool = new PixelPool({ threads: 1 });
  afterAll(() => pool.close());
  const limits = { maxInputPixels: 1e7 };
  // A model call's prefix (the message's bytes before the tensor): any bytes do for the layout.
  const prefix = Uint8Array.from({ length: 37 }, (_, i) => (i * 31 + 7) & 255);
  /** The messages the stand-in model was sent, copied. */
  const sent: Buffer[] = [];
  const model = Object.assign(
    ((input, signal, size) => {
      if (isFramed(input)) sent.push(Buffer.from(input.message));
      return softDiscModel(input, signal, size);
    }) as MaskModel,
    { prefix: () => prefix },
  );
  // A refill runs once the worker's event loop turns after the render's answer: these pauses let
  // it run before a count is read (an order, not a timing: it takes a few ms).
  const settled = () => new Promise((resolve) => setTimeout(resolve, 200));
  const taken = async () => (await pool.workerKernelCalls()).warmSpareTaken ?? 0;
  /** A request's segmentation as the handler makes it (model-size image movable, decoded beside when small). */
  const segmented = async (bytes: Buffer) => {
    const probe = await probeImage(bytes, limits);
    const seg = await segment(bytes, probe, ISNET_PROFILE, model, limits, AbortSignal.timeout(60_000), true, pool, undefined, 'movable');
    return { probe, seg };
  };

  it('takes the image and the message from spares made after the last render, and they are the bytes made in this thread', async () => {
    // 1224x816: the height grows, so the enlarge writes the model-size image into a spare;
    // 2000x1500: both axes shrink, sharp makes it and the worker copies it (into a spare too).
    let requests = 0;
    for (const [width, height] of [
      [1224, 816],
      [2000, 1500],
    ] as const) {
      for (let run = 0; run < 3; run++) {
        const { bytes } = await objectOnTexture(width, height, 'jpeg', { x: 0.4 + run * 0.1, y: 0.55 });
        const before = await taken();
        const { probe, seg } = await segmented(bytes);
        // The first request finds no spare; each later one takes two (image, message).
        expect((await taken()) - before, `${width}x${height} run ${run}`).toBe(requests === 0 ? 0 : 2);

        const here = await prepareModelInput({ bytes, probe, limits, profile: ISNET_PROFILE, prefix, decodeOnce: true, modelImage: 'movable' });
        expect(isFramed(here.input)).toBe(true);
        if (!isFramed(here.input)) return;
        expect(sent.at(-1)!.equals(here.input.message), `${width}x${height} run ${run}: message`).toBe(true);
        expect(seg.model.rgb.equals(here.rgb), `${width}x${height} run ${run}: model-size image`).toBe(true);
        await renderOutput(seg, DEFAULT_OUTPUT, DISC_RENDER, pool, undefined, undefined, undefined, true);
        await settled();
        requests++;
      }
    }
  });

  it('makes spares only after a lone request (under load, none: no memory held between tasks)', async () => {
    const { bytes } = await objectOnTexture(1224, 816, 'jpeg');
    const segs = [];
    for (let i = 0; i < 3; i++) segs.push((await segmented(bytes)).seg);
    await settled();
    const before = (await pool.workerKernelCalls()).warmSpareRefills ?? 0;
    // Three renders at once on one worker: the first finds the pool idle (a lone request), the others do not.
    await Promise.all(segs.map((seg) => renderOutput(seg, DEFAULT_OUTPUT, DISC_RENDER, pool, undefined, undefined, undefined, true)));
    await settled();
    expect(((await pool.workerKernelCalls()).warmSpareRefills ?? 0) - before).toBe(1);
  });
});
