import sharp from 'sharp';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import type { RemoveBgHandler } from '../src/core/index.js';
import { renderOutput, type Rendered } from '../src/core/image/output.js';
import { PixelPool } from '../src/core/image/pixel-pool.js';
import { DEFAULT_OUTPUT } from '../src/core/output-options.js';
import { formRequest } from './helpers/core-request.js';
import { multipartBody } from './helpers/fixtures.js';
import { objectOnTexture } from './helpers/synthetic-image.js';
import { DISC_RENDER, segmentWithSoftDisc } from './helpers/disc-model.js';
import { oneKeyHandler } from './helpers/one-key-handler.js';

/**
 * remove.bg's JSON answer (`Accept: application/json` at /v1.0/removebg): what the render hands
 * the main thread is the JSON body alone, `{ data: { result_b64, foreground_* } }`, made in the
 * worker; the encoded image stays there, and the main thread never base64-encodes or stringifies
 * it (a 24 MP PNG is tens of MB of base64). Asserted on what the main thread receives, not on
 * time. The body is the same bytes remove.bg's answer was before: JSON.stringify of that object,
 * built here from the image answer of the same render.
 */
/** remove.bg's JSON answer as JSON.stringify makes it (what answers.ts returned before the worker made it). */
const stringified = (image: Buffer, box: NonNullable<Rendered['foreground']>) =>
  Buffer.from(JSON.stringify({ data: { result_b64: image.toString('base64'), foreground_top: box.top, foreground_left: box.left, foreground_width: box.width, foreground_height: box.height } }));

describe("remove.bg's JSON answer on the main thread", () => {
  let pool: PixelPool;
  let photo: Buffer;
  beforeAll(async () => {
    pool = new PixelPool({ threads: 1 });
    photo = (await objectOnTexture(480, 360)).bytes;
  });
  afterAll(() => pool?.close());

  const render = DISC_RENDER;
  const segment = () => segmentWithSoftDisc(photo, pool);

  it('gets the JSON body from the render, byte-equal to JSON.stringify of the image answer of the same render, and no copy of the image beside it', async () => {
    const json = await renderOutput(await segment(), DEFAULT_OUTPUT, render, pool, { shape: 'removebg' });
    const image = await renderOutput(await segment(), DEFAULT_OUTPUT, render, pool);
    // The image stayed in the worker: nothing of it crossed but its length.
    expect(json.body.length).toBe(0);
    expect(json.bodyBytes).toBe(image.body.length);
    expect(image.foreground).not.toBeNull();
    expect(json.foreground).toEqual(image.foreground);
    expect(json.json!.equals(stringified(image.body, image.foreground!))).toBe(true);
    expect(await sharp(image.body).metadata()).toMatchObject({ format: 'png', width: 480, height: 360, channels: 4 });
  }, 120_000);
});

describe('POST /v1.0/removebg with Accept: application/json, through the handler (the real model)', () => {
  let handler: RemoveBgHandler;
  let key: string;
  let photo: Buffer;
  /** What each render handed the main thread. */
  let received: Rendered[] = [];
  beforeAll(async () => {
    ({ handler, key } = await oneKeyHandler('acct_open', inject('inferenceAddress')));
    photo = (await objectOnTexture(320, 240)).bytes;
    const render = PixelPool.prototype.render;
    vi.spyOn(PixelPool.prototype, 'render').mockImplementation(async function (this: PixelPool, job) {
      const result = await render.call(this, job);
      received.push(result);
      return result;
    });
  });
  afterEach(() => (received = []));
  afterAll(async () => {
    vi.restoreAllMocks();
    await handler?.close();
  });

  const removeBg = async (accept?: string) => {
    const driven = formRequest(key, multipartBody([{ name: 'image_file', filename: 'photo.jpg', type: 'image/jpeg', data: photo }, { name: 'size', data: 'full' }]), '/v1.0/removebg');
    if (accept) driven.request.headers.accept = accept;
    const response = await handler.removeBg(driven.request);
    expect(response.status, response.body.toString().slice(0, 300)).toBe(200);
    return response;
  };

  it("answers remove.bg's JSON as the render's worker made it; the main thread got no image", async () => {
    const response = await removeBg('application/json');
    expect(received).toHaveLength(1);
    const [rendered] = received as [Rendered];
    expect(rendered.body.length).toBe(0);
    // The answer's body is the worker's JSON itself: no re-encoding on the main thread.
    expect(response.body).toBe(rendered.json);
    expect(response.headers['content-type']).toBe('application/json');
    expect(response.headers['content-length']).toBe(String(response.body.length));
    const { data } = JSON.parse(response.body.toString()) as { data: { result_b64: string; foreground_top: number; foreground_left: number; foreground_width: number; foreground_height: number } };
    expect(Object.keys(data)).toEqual(['result_b64', 'foreground_top', 'foreground_left', 'foreground_width', 'foreground_height']);
    const image = Buffer.from(data.result_b64, 'base64');
    expect(image.length).toBe(rendered.bodyBytes);
    expect(response.body.equals(stringified(image, { top: data.foreground_top, left: data.foreground_left, width: data.foreground_width, height: data.foreground_height }))).toBe(true);
    expect(data.foreground_width).toBe(Number(response.headers['x-foreground-width']));
    expect(data.foreground_top).toBe(Number(response.headers['x-foreground-top']));
    expect(await sharp(image).metadata()).toMatchObject({ format: 'png', width: 320, height: 240 });
  }, 480_000);

  it('answers the image itself without Accept: application/json (so the check above is not vacuous)', async () => {
    const response = await removeBg();
    expect(received).toHaveLength(1);
    expect(received[0]!.json).toBeUndefined();
    expect(response.body).toBe(received[0]!.body);
    expect(response.headers['content-type']).toBe('image/png');
    expect(await sharp(response.body).metadata()).toMatchObject({ format: 'png', width: 320, height: 240 });
  }, 480_000);
});
