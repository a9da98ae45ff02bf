import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { ISNET_PROFILE } from '../src/core/image/profile.js';
import { probeImage, segment, type DecodeGate, type MaskModel } from '../src/core/image/pipeline.js';
import { Budget } from '../src/core/limits/budget.js';
import { objectOnTexture } from './helpers/synthetic-image.js';

/**
 * The decode budget (limits.maxDecodePixels): the model's input decodes of uploads arriving
 * together run as many at a time as the budget holds, in arrival order, the rest waiting with
 * only their upload. Observed by counting sharp's output calls (`toBuffer`: every decode is one)
 * from the call until its promise settles (the model here is a stand-in that returns an empty
 * mask: what is tested is the bookkeeping). sharp's own task counters were used before and
 * flaked: they read a third task while two gates were held (a finished task still counted as
 * processing), so they are not evidence of overlap.
 */
const limits = { maxInputPixels: 50_000_000 };
// No pixel pool: the model's input is then decoded on this thread's sharp, whose calls the test
// sees (a pool worker's calls are made in that thread). The gate is taken around the same call
// either way (pipeline.ts).
const pool = undefined;

const emptyModel: MaskModel = async () => ({ mask: new Uint8Array(ISNET_PROFILE.width * ISNET_PROFILE.height) });

/** Runs `count` segmentations of `bytes` at once; the most sharp decodes in flight together, and the gate's log. */
async function burst(bytes: Buffer, count: number, budget: Budget | undefined) {
  const probe = await probeImage(bytes, limits);
  let inFlight = 0;
  let most = 0;
  let holding = 0;
  let mostHolding = 0;
  const taken: number[] = [];
  const sharpPrototype = Object.getPrototypeOf(sharp()) as { toBuffer: (...args: unknown[]) => unknown };
  const toBuffer = sharpPrototype.toBuffer;
  sharpPrototype.toBuffer = function (this: unknown, ...args: unknown[]) {
    const result = toBuffer.apply(this, args);
    if (!(result instanceof Promise)) return result;
    most = Math.max(most, ++inFlight);
    return result.finally(() => inFlight--);
  };
  const gate: DecodeGate | undefined = budget
    ? async (pixels, signal) => {
        const release = await budget.take(pixels, signal);
        taken.push(pixels);
        mostHolding = Math.max(mostHolding, ++holding);
        return () => {
          holding--;
          release();
        };
      }
    : undefined;
  try {
    const segs = await Promise.all(
      Array.from({ length: count }, () => segment(bytes, probe, ISNET_PROFILE, emptyModel, limits, AbortSignal.timeout(60_000), false, pool, gate)),
    );
    expect(segs.every((s) => s.model.rgb.length === ISNET_PROFILE.width * ISNET_PROFILE.height * 3)).toBe(true);
  } finally {
    sharpPrototype.toBuffer = toBuffer;
  }
  return { most, mostHolding, taken, pixels: probe.width * probe.height, holdingAfter: holding };
}

describe('decode budget', () => {
  it('decodes six large uploads one at a time when the budget holds one, each taking its source pixels', async () => {
    const { bytes } = await objectOnTexture(2000, 1500);
    const run = await burst(bytes, 6, new Budget(3_000_000));
    expect(run.taken).toEqual(Array(6).fill(3_000_000));
    expect(run.mostHolding).toBe(1);
    // The decode itself runs inside the gate: never two sharp decodes at once.
    expect(run.most).toBe(1);
    expect(run.holdingAfter).toBe(0);
  });

  it('lets small uploads decode together up to the budget', async () => {
    const { bytes } = await objectOnTexture(1000, 750);
    const run = await burst(bytes, 6, new Budget(1_500_000));
    expect(run.mostHolding).toBe(2);
    expect(run.most).toBeLessThanOrEqual(2);
  });

  it('without a gate the same burst decodes at once (what the budget prevents)', async () => {
    const { bytes } = await objectOnTexture(2000, 1500);
    const run = await burst(bytes, 6, undefined);
    expect(run.most).toBeGreaterThan(1);
  });

  it('a waiter whose request is aborted leaves without decoding', async () => {
    const { bytes } = await objectOnTexture(800, 600);
    const probe = await probeImage(bytes, limits);
    const budget = new Budget(probe.width * probe.height);
    const held = budget.tryTake(probe.width * probe.height)!;
    const gone = new AbortController();
    const waiting = segment(bytes, probe, ISNET_PROFILE, emptyModel, limits, gone.signal, false, pool, (pixels, signal) => budget.take(pixels, signal));
    gone.abort(new Error('client left'));
    await expect(waiting).rejects.toThrow('client left');
    expect(budget.queued).toBe(0);
    held();
    expect(budget.inUse).toBe(0);
  });
});
