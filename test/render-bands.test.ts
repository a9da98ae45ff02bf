import os from 'node:os';
import { afterAll, describe, expect, it, inject } from 'vitest';
import { IdleCores } from '../src/core/image/idle-cores.js';
import { estimateForeground } from '../src/core/image/foreground.js';
import { InferenceClient } from '../src/core/inference/inference-client.js';
import { renderOutput } from '../src/core/image/output.js';
import { probeImage, segment, type MaskModel, type Segmentation } from '../src/core/image/pipeline.js';
import { PixelPool } from '../src/core/image/pixel-pool.js';
import { ISNET_PROFILE } from '../src/core/image/profile.js';
import { planBands } from '../src/core/image/render-bands.js';
import { isShared, sharedBuffer } from '../src/core/image/shared-bytes.js';
import { upscaleMask } from '../src/core/image/tensor.js';
import { DEFAULT_OUTPUT, type OutputOptions } from '../src/core/output-options.js';
import { DISC_RENDER, softDiscModel } from './helpers/disc-model.js';
import { objectOnTexture, softDisc } from './helpers/synthetic-image.js';

/**
 * A lone render on a pool with idle workers is made in row bands by several of them at once
 * (render-bands.ts): the same bytes as one worker's render, and only while workers are idle.
 * "Where" is read from the pool's record of the tasks that ran (PixelPool.tasksRan), never from
 * timings.
 */
const limits = { maxInputPixels: 50_000_000 };
const whole = new PixelPool({ threads: 1 });
// The host's cores are taken as idle here (a loaded test machine has none): what is tested is
// the split by idle workers; the cores' part has a test of its own.
const split = new PixelPool({ threads: 3, renderBands: 3, idleCores: () => 16 });
afterAll(() => Promise.all([whole.close(), split.close()]));

/** The tasks `pool` ran for what `work` started (their names, in the order they came back). */
async function tasksOf<T>(pool: PixelPool, work: () => Promise<T>): Promise<{ result: T; tasks: string[] }> {
  const before = pool.tasksSettled;
  const result = await work();
  return { result, tasks: pool.tasksSince(before).map((t) => t.name) };
}

async function segmentIn(pool: PixelPool, bytes: Buffer, model: MaskModel = softDiscModel): Promise<Segmentation> {
  // As a request's cutout segments (multi-pass.ts at `balanced`): the model-size image moved, not shared.
  return segment(bytes, await probeImage(bytes, limits), ISNET_PROFILE, model, limits, AbortSignal.timeout(120_000), true, pool, undefined, 'movable');
}

/** The cutout of `bytes` by `pool`, and the pool's tasks for its render. */
async function cutout(pool: PixelPool, bytes: Buffer, model?: MaskModel, options: OutputOptions = DEFAULT_OUTPUT) {
  const seg = await segmentIn(pool, bytes, model);
  const { result, tasks } = await tasksOf(pool, () => renderOutput(seg, options, DISC_RENDER, pool, undefined, undefined, undefined, true));
  return { body: result.body, foreground: result.foreground, tasks };
}

describe('a render split across idle pixel workers', () => {
  for (const format of ['jpeg', 'png'] as const) {
    it(`makes the same PNG as one worker's render, in two bands then one encode (${format} upload, 1 MP)`, async () => {
      // Off-centre and cut by the border, so the bands' soft edges and boxes differ.
      const image = await objectOnTexture(1224, 816, format, { x: 0.4, y: 0.3 });
      const one = await cutout(whole, image.bytes);
      const banded = await cutout(split, image.bytes);
      expect(one.tasks).toEqual(['render']);
      expect(banded.tasks.filter((t) => t === 'renderBand')).toHaveLength(2);
      expect(banded.tasks.at(-1)).toBe('render');
      expect(banded.body.length).toBeGreaterThan(0);
      expect(banded.body.equals(one.body)).toBe(true);
      expect(banded.foreground).toEqual(one.foreground);
    });
  }

  it("makes the same PNG as one worker's render from the real model's mask (its soft edges)", async () => {
    const client = new InferenceClient({ address: inject('inferenceAddress'), timeoutMs: 120_000, maxMessageBytes: 64 << 20, retryAfterSeconds: 1 });
    try {
      const model = client.maskModel('isnet', ISNET_PROFILE);
      const image = await objectOnTexture(1224, 816, 'jpeg', { x: 0.55, y: 0.5 });
      // The model runs once: both renders use its mask.
      let recorded: Awaited<ReturnType<MaskModel>> | undefined;
      const once: MaskModel = async (input, signal, size) => (recorded ??= await model(input, signal, size));
      const banded = await cutout(split, image.bytes, once);
      const one = await cutout(whole, image.bytes, once);
      expect(banded.tasks.filter((t) => t === 'renderBand')).toHaveLength(2);
      expect(banded.body.equals(one.body)).toBe(true);
    } finally {
      await client.close();
    }
  }, 120_000);

  it('stays one task while the workers are busy, and splits across only those idle', async () => {
    const image = await objectOnTexture(1224, 816, 'jpeg');
    const [a, b] = [await segmentIn(split, image.bytes), await segmentIn(split, image.bytes)];
    const before = split.tasksSettled;
    // Two renders at once on three workers: the first finds three idle and takes two (a 1 MP
    // image's most: MIN_BAND_PIXELS); the second finds one (two band tasks given and not settled)
    // and renders as one task.
    const [ra, rb] = await Promise.all([renderOutput(a, DEFAULT_OUTPUT, DISC_RENDER, split), renderOutput(b, DEFAULT_OUTPUT, DISC_RENDER, split)]);
    const tasks = split.tasksSince(before).map((t) => t.name);
    expect(tasks.filter((t) => t === 'renderBand')).toHaveLength(2);
    expect(tasks.filter((t) => t === 'render')).toHaveLength(2);
    expect(ra.body.equals(rb.body)).toBe(true);
    // With one worker busy, a render splits across the two left.
    const c = await segmentIn(split, image.bytes);
    // Segmented while the workers were idle: the model-size image the bands all read is shared.
    expect(isShared(c.model.rgb)).toBe(true);
    expect(split.idleWorkers()).toBe(3);
    const busy = split.workerKernelCalls();
    expect(split.idleWorkers()).toBe(2);
    const { tasks: third } = await tasksOf(split, () => renderOutput(c, DEFAULT_OUTPUT, DISC_RENDER, split));
    await busy;
    expect(third.filter((t) => t === 'renderBand')).toHaveLength(2);
  }, 60_000);

  it('takes one band per idle core past its own: none on a busy host', async () => {
    let cores = 0;
    const pool = new PixelPool({ threads: 3, renderBands: 3, idleCores: () => cores });
    try {
      const image = await objectOnTexture(1224, 816, 'jpeg');
      const seg = async () => segmentIn(pool, image.bytes);
      const busyHost = await seg();
      expect(isShared(busyHost.model.rgb)).toBe(false);
      const one = await tasksOf(pool, () => renderOutput(busyHost, DEFAULT_OUTPUT, DISC_RENDER, pool));
      expect(one.tasks).toEqual(['render']);
      cores = 1.6;
      const oneIdleCore = await seg();
      const two = await tasksOf(pool, () => renderOutput(oneIdleCore, DEFAULT_OUTPUT, DISC_RENDER, pool));
      expect(two.tasks.filter((t) => t === 'renderBand')).toHaveLength(2);
      expect(two.result.body.equals(one.result.body)).toBe(true);
      expect([pool.rendersInBands, pool.rendersWhole]).toEqual([1, 1]);
    } finally {
      await pool.close();
    }
  });

  it("samples the host's idle cores: between none and all of them", async () => {
    const sampler = new IdleCores(20);
    try {
      await new Promise((resolve) => setTimeout(resolve, 120));
      expect(sampler.now).toBeGreaterThanOrEqual(0);
      expect(sampler.now).toBeLessThanOrEqual(os.cpus().length);
    } finally {
      sampler.close();
    }
  });

  it('plans no bands for renders it does not split: a small image, one idle worker, a crop, a colour, JPEG, alpha only', async () => {
    const image = await objectOnTexture(1224, 816, 'jpeg');
    const seg = await segmentIn(split, image.bytes);
    const job = { bytes: seg.bytes, probe: seg.probe, limits, decoded: seg.rgb, mask: seg.mask, view: seg.model, options: DEFAULT_OUTPUT, render: DISC_RENDER };
    expect(planBands(job, 3, 3)?.length).toBe(2);
    expect(planBands(job, 1, 3)).toBeNull();
    // 0.67 MP: under two bands' worth.
    expect(planBands({ ...job, probe: { ...job.probe, width: 1000, height: 667 } }, 3, 3)).toBeNull();
    expect(planBands(job, 3, 1)).toBeNull();
    expect(planBands({ ...job, options: { ...DEFAULT_OUTPUT, crop: true } }, 3, 3)).toBeNull();
    expect(planBands({ ...job, options: { ...DEFAULT_OUTPUT, bgColor: { r: 1, g: 2, b: 3, alpha: 1 } } }, 3, 3)).toBeNull();
    expect(planBands({ ...job, options: { ...DEFAULT_OUTPUT, format: 'jpg' } }, 3, 3)).toBeNull();
    expect(planBands({ ...job, options: { ...DEFAULT_OUTPUT, channels: 'alpha' } }, 3, 3)).toBeNull();
    expect(planBands({ ...job, decoded: undefined }, 3, 3)).toBeNull();
    // A model-size view in memory of its own (segmented under load: moved to one worker).
    expect(planBands({ ...job, view: { ...seg.model, rgb: Buffer.from(seg.model.rgb) } }, 3, 3)).toBeNull();
    // Segmented while no worker was idle, the view is moved as asked, not shared.
    const probe = await probeImage(image.bytes, limits);
    const blockers = [split.workerKernelCalls(), split.workerKernelCalls()];
    // segment() picks the memory as it is called, before its first await.
    const underLoad = await segment(image.bytes, probe, ISNET_PROFILE, softDiscModel, limits, AbortSignal.timeout(120_000), true, split, undefined, 'movable');
    await Promise.all(blockers);
    expect(isShared(underLoad.model.rgb)).toBe(false);

    // Band edges on rows that are multiples of 4, the whole height covered once.
    const bands = planBands({ ...job, probe: { ...job.probe, width: 2048, height: 1366 }, decoded: sharedBuffer(2048 * 1366 * 3) }, 3, 3)!;
    expect(bands).toHaveLength(3);
    expect(bands[0]!.top).toBe(0);
    expect(bands.at(-1)!.bottom).toBe(1366);
    for (let k = 1; k < bands.length; k++) {
      expect(bands[k]!.top).toBe(bands[k - 1]!.bottom);
      expect(bands[k]!.top % 4).toBe(0);
    }
  });
});

describe('the kernels on row ranges', () => {
  // Odd widths: a band's rows start off a 4-byte boundary, where the kernels read byte by byte.
  const cases = [
    { name: '1001 x 667 from a 64 x 64 mask, cut at 1, 333, 334 and 666', w: 1001, h: 667, cuts: [0, 1, 333, 334, 666, 667] },
    { name: '640 x 480 in two halves', w: 640, h: 480, cuts: [0, 240, 480] },
  ];
  for (const c of cases) {
    it(`upscaleMask and estimateForeground by rows make the whole image's bytes: ${c.name}`, async () => {
      const grey = softDisc(64, 7);
      const wholeMask = upscaleMask(grey, 64, 64, c.w, c.h);
      const banded = Buffer.alloc(c.w * c.h, 77);
      for (let k = 1; k < c.cuts.length; k++) upscaleMask(grey, 64, 64, c.w, c.h, banded, { rows: { top: c.cuts[k - 1]!, bottom: c.cuts[k]! } });
      expect(banded.equals(wholeMask)).toBe(true);
      // The JavaScript loops by rows too (the WebAssembly path is taken above where it applies).
      const bandedJs = Buffer.alloc(c.w * c.h, 77);
      for (let k = 1; k < c.cuts.length; k++) upscaleMask(grey, 64, 64, c.w, c.h, bandedJs, { simd: false, rows: { top: c.cuts[k - 1]!, bottom: c.cuts[k]! } });
      expect(bandedJs.equals(wholeMask)).toBe(true);

      const { rgb } = await objectOnTexture(c.w, c.h, 'raw');
      const view = { rgb: Buffer.alloc(64 * 64 * 3), alpha: grey, width: 64, height: 64 };
      for (let i = 0; i < view.rgb.length; i++) view.rgb[i] = (i * 37) & 255;
      const wholeColour = await estimateForeground(Buffer.from(rgb), wholeMask, c.w, c.h, view);
      const bandColour = Buffer.from(rgb);
      for (let k = 1; k < c.cuts.length; k++) await estimateForeground(bandColour, banded, c.w, c.h, view, 'band', { rows: { top: c.cuts[k - 1]!, bottom: c.cuts[k]! } });
      expect(wholeColour.equals(rgb)).toBe(false);
      expect(bandColour.equals(wholeColour)).toBe(true);
      const bandColourJs = Buffer.from(rgb);
      for (let k = 1; k < c.cuts.length; k++) await estimateForeground(bandColourJs, banded, c.w, c.h, view, 'band', { simd: false, rows: { top: c.cuts[k - 1]!, bottom: c.cuts[k]! } });
      expect(bandColourJs.equals(wholeColour)).toBe(true);
    });
  }

  it('refuses a row range outside the image', () => {
    expect(() => upscaleMask(softDisc(8, 0), 8, 8, 10, 10, Buffer.alloc(100), { rows: { top: 4, bottom: 11 } })).toThrow(RangeError);
  });
});
