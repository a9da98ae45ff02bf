import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import type { RemoveBgHandler } from '../src/core/index.js';
import { kernelCalls } from '../src/core/image/kernel-calls.js';
import { PixelPool } from '../src/core/image/pixel-pool.js';
import { isGatheredUpload, releaseUpload, UploadBytes } from '../src/core/upload-bytes.js';
import { uploadRequest } from './helpers/core-request.js';
import { oneKeyHandler } from './helpers/one-key-handler.js';
import { objectOnTexture } from './helpers/synthetic-image.js';

/**
 * A synchronous request's upload is memory of its own, not shared: it is lent to the pixel pool's
 * task that decodes it for the model (moved there and back), moved into the render, and whatever
 * the request still holds of it is freed as it ends (util/release-now.ts). Shared memory lived
 * until the host's thread ran a full collection, so 16 concurrent 12 MP uploads left the finished
 * requests' uploads resident beside the live ones (docs/benchmarks-history.md, "Eighth round, memory").
 * Asserted on the buffers themselves (a moved or freed buffer reads as empty here) and on the
 * hand-off copies this thread made (none: lending is not copying), with the real model.
 */
describe('UploadBytes', () => {
  it('gathers a part of declared length into memory of its own, which releaseUpload frees whole', () => {
    const upload = new UploadBytes(200_000);
    upload.push(Buffer.alloc(100_000, 1));
    upload.push(Buffer.alloc(50_000, 2));
    const bytes = upload.bytes();
    expect(bytes.buffer).toBeInstanceOf(ArrayBuffer);
    expect(isGatheredUpload(bytes)).toBe(true);
    expect(bytes.length).toBe(150_000);
    expect(bytes[99_999]).toBe(1);
    expect(bytes[100_000]).toBe(2);
    // Its unused tail goes with it.
    expect(releaseUpload(bytes)).toBe(true);
    expect(bytes.length).toBe(0);
    // Not what it did not gather: a view into other memory stays.
    const other = Buffer.alloc(200_000, 3);
    expect(releaseUpload(other.subarray(0, 150_000))).toBe(false);
    expect(other.length).toBe(200_000);
  });
});

describe("a synchronous request's upload is moved or freed by the time its answer is out", () => {
  let handler: RemoveBgHandler;
  let key: string;
  let images: Record<string, Buffer>;
  const uploads: Buffer[] = [];
  const lentBack: Buffer[] = [];
  beforeAll(async () => {
    ({ handler, key } = await oneKeyHandler('acct_upload_freed', inject('inferenceAddress')));
    const { rgb } = await objectOnTexture(480, 360, 'raw');
    images = {
      // Decoded once for the model and the render (under twice the model's size): the render does not read the upload.
      small: (await objectOnTexture(1000, 750)).bytes,
      // Twice the model's size on both axes: the render decodes the upload itself.
      large: (await objectOnTexture(2200, 2100)).bytes,
      // A PNG with alpha of about the model's size: decoded in full beside the model call.
      rgba: await sharp(rgb, { raw: { width: 480, height: 360, channels: 3 } }).ensureAlpha(0.5).png().toBuffer(),
      // Not an image: refused (415) after the upload was read.
      garbage: Buffer.alloc(100_000, 0x5a),
    };
    const gather = UploadBytes.prototype.bytes;
    vi.spyOn(UploadBytes.prototype, 'bytes').mockImplementation(function (this: UploadBytes) {
      const bytes = gather.call(this);
      uploads.push(bytes);
      return bytes;
    });
    const modelInput = PixelPool.prototype.modelInput;
    vi.spyOn(PixelPool.prototype, 'modelInput').mockImplementation(async function (this: PixelPool, ...args) {
      const result = await modelInput.apply(this, args);
      if (result.bytes) lentBack.push(result.bytes);
      return result;
    });
    const fullDecode = PixelPool.prototype.fullDecode;
    vi.spyOn(PixelPool.prototype, 'fullDecode').mockImplementation(async function (this: PixelPool, ...args) {
      const result = await fullDecode.apply(this, args);
      if (result.bytes) lentBack.push(result.bytes);
      return result;
    });
  }, 120_000);
  afterAll(async () => {
    vi.restoreAllMocks();
    await handler?.close();
  });

  const cases: [image: string, query: string, status: number][] = [
    ['small', '', 200],
    ['large', '', 200],
    ['large', '?channels=alpha', 200],
    ['rgba', '', 200],
    ['small', '?quality=best', 200],
    ['garbage', '', 415],
  ];

  it.each(cases)('%s%s: nothing of the upload is left on this thread, and nothing was copied to hand it on', async (image, query, status) => {
    uploads.length = 0;
    lentBack.length = 0;
    const copiesBefore = kernelCalls.handOffCopy ?? 0;
    const driven = uploadRequest(key, images[image]!);
    driven.request.url = `/v1/remove-bg${query}`;
    const response = await handler.handle(driven.request);
    expect(response.status, response.body.toString().slice(0, 200)).toBe(status);
    if (status === 200) expect((await sharp(response.body).metadata()).width).toBeGreaterThan(0);
    expect(uploads.length).toBeGreaterThan(0);
    // Each a view that reads as empty: its memory was moved to a worker or freed.
    expect(uploads.map((bytes) => bytes.length)).toEqual(uploads.map(() => 0));
    expect(lentBack.map((bytes) => bytes.length)).toEqual(lentBack.map(() => 0));
    if (status === 200 && query !== '?quality=best') expect(lentBack.length).toBeGreaterThan(0);
    expect((kernelCalls.handOffCopy ?? 0) - copiesBefore).toBe(0);
  }, 600_000);
});
