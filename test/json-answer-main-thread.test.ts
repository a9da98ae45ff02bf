import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderOutput } from '../src/core/image/output.js';
import { PixelPool } from '../src/core/image/pixel-pool.js';
import { DEFAULT_OUTPUT } from '../src/core/output-options.js';
import { objectOnTexture } from './helpers/synthetic-image.js';
import { DISC_RENDER, segmentWithSoftDisc } from './helpers/disc-model.js';

/**
 * `response=json`: what the render hands the main thread is the JSON body alone, which holds the
 * image in base64; the encoded image itself stays in the worker. Every large buffer that reaches
 * the main thread is external memory to its heap, and V8 runs a full collection there, on the
 * host's event loop, each time enough of it has come since the last one (docs/benchmarks-history.md,
 * "What runs in the longest blocks, fifth round"): a 24 MP JSON answer brought its image and its
 * JSON, about 2.3 times the image. Asserted on what the main thread receives, not on time. The
 * model is a stand-in (a disc): what is tested is what crosses from the worker.
 */
describe('response=json on the main thread', () => {
  let pool: PixelPool;
  let photo: Buffer;
  beforeAll(async () => {
    pool = new PixelPool({ threads: 1 });
    photo = (await objectOnTexture(480, 360)).bytes;
  });
  afterAll(() => pool?.close());

  const render = DISC_RENDER;
  const segment = () => segmentWithSoftDisc(photo, pool);

  it('gets the JSON body from the render and no copy of the image beside it; the JSON holds the whole image', async () => {
    const rendered = await renderOutput(await segment(), DEFAULT_OUTPUT, render, pool, { filename: 'photo.png' });
    expect(rendered.json?.length ?? 0).toBeGreaterThan(0);
    // The image stayed in the worker: nothing of it crossed but its length.
    expect(rendered.body.length).toBe(0);
    const answer = JSON.parse(rendered.json!.toString()) as { data: string; width: number; height: number; contentType: string };
    const image = Buffer.from(answer.data, 'base64');
    expect(image.length).toBe(rendered.bodyBytes);
    expect(answer).toMatchObject({ width: 480, height: 360, contentType: 'image/png' });
    expect(await sharp(image).metadata()).toMatchObject({ format: 'png', width: 480, height: 360, channels: 4 });
  }, 120_000);

  it('gets the image itself when no JSON was asked for (so the check above is not vacuous)', async () => {
    const rendered = await renderOutput(await segment(), DEFAULT_OUTPUT, render, pool);
    expect(rendered.json).toBeUndefined();
    expect(await sharp(rendered.body).metadata()).toMatchObject({ format: 'png', width: 480, height: 360 });
  }, 120_000);
});
