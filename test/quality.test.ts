import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createRemoveBgHandler, FileKeyStore, ISNET_PROFILE, validatePlans, type RemoveBgHandler } from '../src/core/index.js';
import { BEST_PASSES, flipGrey, maxPasses, mergeMasks, objectCrop, pasteBlended, planFor, QUALITY_QUOTA_WEIGHT, segmentAtQuality } from '../src/core/image/multi-pass.js';
import { fullSizeAlpha, probeImage, segment, type MaskModel } from '../src/core/image/pipeline.js';
import { PixelPool } from '../src/core/image/pixel-pool.js';
import { InferenceClient } from '../src/core/inference/inference-client.js';
import { quotaCost } from '../src/core/limits/plans.js';
import { parseOutputOptions } from '../src/core/output-options.js';
import { uploadRequest } from './helpers/core-request.js';
import { metricValue } from './helpers/fuzz.js';
import { captureInternalError, recordIssuedKeys } from './helpers/log-capture.js';
import { objectOnTexture } from './helpers/synthetic-image.js';

const limits = { maxInputPixels: 40_000_000 };

function iou(alpha: Buffer, truth: Uint8Array): number {
  let inter = 0;
  let union = 0;
  for (let i = 0; i < truth.length; i++) {
    const a = alpha[i]! >= 128;
    if (a && truth[i]) inter++;
    if (a || truth[i]) union++;
  }
  return inter / union;
}

describe('the quality option', () => {
  it('parses fast, balanced and best; defaults to balanced; refuses anything else', () => {
    expect(parseOutputOptions({}, '/v1/remove-bg', {}).options.quality).toBe('balanced');
    expect(parseOutputOptions({ quality: 'Best' }, '/v1/remove-bg', {}).options.quality).toBe('best');
    expect(parseOutputOptions({}, '/v1/remove-bg?quality=fast', {}).options.quality).toBe('fast');
    expect(() => parseOutputOptions({ quality: 'ultra' }, '/v1/remove-bg', {})).toThrow(/quality/);
  });

  it('plans list the qualities they allow, and must keep the default', () => {
    expect(() => validatePlans({ a: { requestsPerMinute: 1, qualities: ['fast', 'balanced'] } })).not.toThrow();
    expect(() => validatePlans({ a: { requestsPerMinute: 1, qualities: ['ultra'] } })).toThrow(/qualities/);
    expect(() => validatePlans({ a: { requestsPerMinute: 1, qualities: ['best'] } })).toThrow(/balanced/);
  });

  it('a best cutout weighs its passes against the quota', () => {
    expect(QUALITY_QUOTA_WEIGHT).toEqual({ fast: 1, balanced: 1, best: maxPasses(BEST_PASSES) });
    expect(quotaCost({ unit: 'images', amount: 10 }, 5e6, QUALITY_QUOTA_WEIGHT.best)).toBe(maxPasses(BEST_PASSES));
    expect(quotaCost({ unit: 'megapixels', amount: 10 }, 2.5e6, 2)).toBe(6);
  });
});

describe('multi-pass merging', () => {
  it('averages masks, or weighs them by confidence', () => {
    const a = Buffer.from([0, 255, 128, 230]);
    const b = Buffer.from([255, 255, 128, 140]);
    expect([...mergeMasks([a, b], 'mean')]).toEqual([128, 255, 128, 185]);
    // The surer value (230, far from 128) pulls the merge towards itself.
    expect(mergeMasks([a, b], 'confidence')[3]).toBeGreaterThan(185);
  });

  it('finds the object crop only when the object is small in the frame', () => {
    const mask = Buffer.alloc(100 * 100);
    for (let y = 40; y < 60; y++) mask.fill(255, y * 100 + 40, y * 100 + 60);
    expect(objectCrop(mask, 100, 100, 1000, 1000, 0.1, 0.5)).toEqual({ left: 380, top: 380, width: 240, height: 240 });
    mask.fill(255);
    expect(objectCrop(mask, 100, 100, 1000, 1000, 0.1, 0.5)).toBeNull();
    expect(objectCrop(Buffer.alloc(100 * 100), 100, 100, 1000, 1000, 0.1, 1)).toBeNull();
  });

  it('pastes a crop with a ramp at its inner edges and none at the image border', () => {
    const base = Buffer.alloc(10 * 10, 0);
    const part = Buffer.alloc(5 * 10, 255);
    const out = pasteBlended(base, 10, 10, part, { left: 5, top: 0, width: 5, height: 10 }, 4, 'replace');
    const row = [...out.subarray(50, 60)];
    expect(row.slice(0, 5)).toEqual([0, 0, 0, 0, 0]);
    // Ramp up from the crop's left (inner) edge; its right edge is the image's border: no ramp.
    expect(row[5]).toBeLessThan(row[6]!);
    expect(row[6]).toBeLessThan(row[7]!);
    expect(row[7]).toBeLessThan(row[8]!);
    // Four pixels in (the ramp's width), the crop's own mask: its right edge is the image's border.
    expect(row[9]).toBe(255);
  });

  it('mirrors a mask back', () => {
    expect([...flipGrey(Buffer.from([1, 2, 3, 4, 5, 6]), 3, 2)]).toEqual([3, 2, 1, 6, 5, 4]);
  });
});

describe('quality modes with the real model', () => {
  let client: InferenceClient;
  let calls: unknown[] = [];
  const model: MaskModel = async (input, signal) => {
    calls.push(input);
    return client.maskModel('isnet', ISNET_PROFILE)(input, signal);
  };
  const pool = new PixelPool({ threads: 1 });
  afterAll(() => pool.close());
  beforeAll(() => {
    client = new InferenceClient({ address: inject('inferenceAddress'), timeoutMs: 120_000, maxMessageBytes: 64 << 20, retryAfterSeconds: 1 });
  });
  afterAll(() => client?.close());

  it('balanced is exactly the single pass (one model call, the same mask)', async () => {
    const image = await objectOnTexture(640, 480);
    const probe = await probeImage(image.bytes, limits);
    calls = [];
    const single = await segment(image.bytes, probe, ISNET_PROFILE, model, limits, AbortSignal.timeout(120_000));
    const balanced = await segmentAtQuality('balanced', image.bytes, probe, ISNET_PROFILE, model, limits, AbortSignal.timeout(120_000), pool);
    expect(calls.length).toBe(2);
    expect(Buffer.compare(balanced.mask.grey, single.mask.grey)).toBe(0);
    expect(balanced.mask.parts).toEqual([]);
    expect(Buffer.compare(await fullSizeAlpha(balanced, pool), await fullSizeAlpha(single, pool))).toBe(0);
    expect(Buffer.compare(balanced.rgb, single.rgb)).toBe(0);
  }, 120_000);

  it('best runs its passes as separate model calls and returns a full-size mask at least as good', async () => {
    // A small object in the frame: every pass of BEST_PASSES applies.
    const image = await objectOnTexture(640, 480);
    const probe = await probeImage(image.bytes, limits);
    calls = [];
    const balanced = await segmentAtQuality('balanced', image.bytes, probe, ISNET_PROFILE, model, limits, AbortSignal.timeout(120_000), pool);
    calls = [];
    const best = await segmentAtQuality('best', image.bytes, probe, ISNET_PROFILE, model, limits, AbortSignal.timeout(240_000), pool);
    expect(calls.length).toBe(maxPasses(BEST_PASSES));
    // Every call had its own input (the image, its mirror, the object's crop).
    const distinct = new Set(calls.map((c) => `${c[0]}:${c[5000]}:${c[600_000]}:${c[2_000_000]}`));
    expect(distinct.size).toBe(calls.length);
    const bestAlpha = await fullSizeAlpha(best, pool);
    expect(bestAlpha.length).toBe(640 * 480);
    expect(best.mask.parts.length).toBe(1);
    expect(best.width).toBe(640);
    const bestIou = iou(bestAlpha, image.truth);
    expect(bestIou).toBeGreaterThan(0.9);
    expect(bestIou).toBeGreaterThan(iou(await fullSizeAlpha(balanced, pool), image.truth) - 0.02);
    expect(best.timings.inference).toBeGreaterThan(0);
  }, 240_000);

  it('on a model that takes any size, each mode sends the image at its plan\'s size and the mask comes back at the image\'s', async () => {
    await client.verifyModel('isnet', ISNET_PROFILE, 10_000);
    expect(client.freeSize('isnet')).toBe(true);
    // A fixed-size model runs every mode at the profile's size.
    expect(planFor(ISNET_PROFILE, 'fast', false)).toBeUndefined();
    const plan = planFor(ISNET_PROFILE, 'fast', true)!;
    expect(plan.size).not.toBe(ISNET_PROFILE.width);
    const image = await objectOnTexture(640, 480);
    const probe = await probeImage(image.bytes, limits);
    const sent: string[] = [];
    const sized: MaskModel = async (input, signal, size) => {
      sent.push(`${size?.width}x${size?.height}:${input.length}`);
      return client.maskModel('isnet', ISNET_PROFILE)(input, signal, size);
    };
    const fast = await segmentAtQuality('fast', image.bytes, probe, ISNET_PROFILE, sized, limits, AbortSignal.timeout(120_000), pool, true, plan);
    expect(sent).toEqual([`${plan.size}x${plan.size}:${plan.size * plan.size * 3}`]);
    const fastAlpha = await fullSizeAlpha(fast, pool);
    expect(fastAlpha.length).toBe(640 * 480);
    expect(fast.model.width).toBe(plan.size);
    expect(iou(fastAlpha, image.truth)).toBeGreaterThan(0.9);
    expect(fast.confidence).toBeGreaterThan(0.5);
  }, 120_000);

  it('best with scales: each pass at its own size (the whole image at two, the crop and its mirror at a third), merged at the image size', async () => {
    const passes = { ...BEST_PASSES, scales: [320], cropSize: 384 };
    const plan = { size: 512, passes };
    const image = await objectOnTexture(640, 480);
    const probe = await probeImage(image.bytes, limits);
    const sent: number[] = [];
    const sized: MaskModel = async (input, signal, size) => {
      expect(input.length).toBe(size!.width * size!.height * 3);
      sent.push(size!.width);
      return client.maskModel('isnet', ISNET_PROFILE)(input, signal, size);
    };
    const best = await segmentAtQuality('best', image.bytes, probe, ISNET_PROFILE, sized, limits, AbortSignal.timeout(120_000), pool, true, plan);
    expect(sent.length).toBe(maxPasses(passes));
    expect(sent.sort((a, b) => a - b)).toEqual([320, 384, 384, 512]);
    const bestAlpha = await fullSizeAlpha(best, pool);
    expect(bestAlpha.length).toBe(640 * 480);
    expect(iou(bestAlpha, image.truth)).toBeGreaterThan(0.9);
    expect(best.confidence).toBeGreaterThan(0.5);
  }, 120_000);
});

describe('quality through the endpoint', () => {
  let handler: RemoveBgHandler;
  const keys: Record<string, string> = {};
  let image: Buffer;
  beforeAll(async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-quality-'));
    const store = new FileKeyStore({ file: path.join(dir, 'keys.json'), reloadIntervalMs: 0 });
    const plans = {
      open: { requestsPerMinute: 1000 },
      two_images: { requestsPerMinute: 1000, monthlyQuota: { unit: 'images' as const, amount: 2 } },
      no_best: { requestsPerMinute: 1000, qualities: ['fast', 'balanced'] },
      format_only: { requestsPerMinute: 1000, outputOptions: ['format'] },
    };
    for (const plan of Object.keys(plans)) keys[plan] = (await store.createKey({ accountId: `acct_${plan}`, plan })).key;
    recordIssuedKeys(Object.values(keys));
    handler = createRemoveBgHandler({ keyStore: store, plans, inference: { address: inject('inferenceAddress'), timeoutMs: 120_000 }, onInternalError: captureInternalError });
    await handler.ready();
    image = (await objectOnTexture(320, 240)).bytes;
  });
  afterAll(() => handler?.close());

  const send = (key: string, query: string) => {
    const driven = uploadRequest(key, image);
    driven.request.url = `/v1/remove-bg${query}`;
    return handler.handle(driven.request);
  };

  it('quality=best answers a cutout of the image', async () => {
    const response = await send(keys.open!, '?quality=best');
    expect(response.status, response.body.toString().slice(0, 300)).toBe(200);
    const meta = await sharp(response.body).metadata();
    expect([meta.format, meta.width, meta.height, meta.channels]).toEqual(['png', 320, 240, 4]);
    expect(Number(response.headers['x-confidence'])).toBeGreaterThan(0.5);
  }, 240_000);

  it('every cutout states its confidence: X-Confidence (two decimals, 0..1), and `confidence` in the JSON answer', async () => {
    const driven = uploadRequest(keys.open!, image);
    driven.request.url = '/v1/remove-bg?quality=fast';
    driven.request.headers.accept = 'application/json';
    const response = await handler.handle(driven.request);
    expect(response.status).toBe(200);
    const header = response.headers['x-confidence']!;
    expect(header).toMatch(/^(0\.\d\d|1\.00)$/);
    expect(JSON.parse(response.body.toString()).confidence).toBe(Number(header));
  }, 120_000);

  it('a request without quality gets exactly what quality=balanced gets', async () => {
    const plain = await send(keys.open!, '');
    const balanced = await send(keys.open!, '?quality=balanced');
    expect(plain.status).toBe(200);
    expect(balanced.status).toBe(200);
    expect(Buffer.compare(plain.body, balanced.body)).toBe(0);
  }, 240_000);

  it('plans restrict it: by qualities, and by outputOptions like any option (403 before any inference)', async () => {
    // The inference server's own count of runs started (files run one at a time: nothing else calls it).
    const runs = async () => metricValue(await (await fetch(inject('inferenceMetricsUrl'))).text(), 'bgcut_inference_started_total');
    const before = await runs();
    const noBest = await send(keys.no_best!, '?quality=best');
    expect(noBest.status).toBe(403);
    expect(JSON.parse(noBest.body.toString()).code).toBe('option_not_in_plan');
    const formatOnly = await send(keys.format_only!, '?quality=fast');
    expect(formatOnly.status).toBe(403);
    expect(await runs()).toBe(before);
    // The counter does count: an allowed cutout moves it.
    expect((await send(keys.no_best!, '?quality=fast')).status).toBe(200);
    expect(await runs()).toBeGreaterThan(before);
  }, 60_000);

  it('a best cutout that weighs more than the quota left is refused with 429', async () => {
    expect(maxPasses(BEST_PASSES)).toBeGreaterThan(2);
    const response = await send(keys.two_images!, '?quality=best');
    expect(response.status).toBe(429);
    expect(JSON.parse(response.body.toString()).code).toBe('quota_exceeded');
  }, 60_000);
});
