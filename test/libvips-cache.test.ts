import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { createRemoveBgHandler, FileKeyStore, type RemoveBgHandler } from '../src/core/index.js';
import { LIBVIPS_CACHE } from '../src/core/image/libvips-cache.js';
import { uploadRequest } from './helpers/core-request.js';
import { captureInternalError, recordIssuedKeys } from './helpers/log-capture.js';
import { objectOnTexture } from './helpers/synthetic-image.js';

/**
 * libvips's operation cache is one per process, and sharp turns it on (50 MB, 20 files, 100
 * operations) in every thread that loads it, the pixel pool's workers included. The API runs with
 * it off (libvips-cache.ts; docs/benchmarks.md, "libvips's operation cache"): asserted on the
 * limits in effect in this process (sharp.cache() reads libvips's own), once the handler is made
 * and again after a real cutout, whose pool worker loaded sharp after that.
 */
const limits = () => {
  const { memory, files, items } = sharp.cache();
  return { memory: memory.max, files: files.max, items: items.max };
};

describe("libvips's operation cache in the API's process", () => {
  let handler: RemoveBgHandler | undefined;
  afterAll(() => handler?.close());

  it('is off once the handler is made, and stays off after a pixel worker loaded sharp for a cutout', async () => {
    // sharp's own default, set when this thread loaded it: what the handler must change.
    sharp.cache(true);
    expect(limits()).toEqual({ memory: 50, files: 20, items: 100 });
    expect(LIBVIPS_CACHE).toEqual({ memory: 0, files: 0, items: 0 });

    const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-vips-cache-'));
    const store = new FileKeyStore({ file: path.join(dir, 'keys.json'), reloadIntervalMs: 0 });
    const { key } = await store.createKey({ accountId: 'acct_cache', plan: 'open' });
    recordIssuedKeys([key]);
    handler = createRemoveBgHandler({
      keyStore: store,
      plans: { open: { requestsPerMinute: 1000 } },
      // A shared 2-core box can queue a model call for minutes: the deadline is not what is tested.
      inference: { address: inject('inferenceAddress'), timeoutMs: 480_000 },
      pixelThreads: 1,
      onInternalError: captureInternalError,
    });
    expect(limits()).toEqual(LIBVIPS_CACHE);

    await handler.ready();
    const { bytes } = await objectOnTexture(320, 240);
    const response = await handler.handle(uploadRequest(key, bytes).request);
    expect(response.status, response.body.toString().slice(0, 200)).toBe(200);
    expect((await sharp(response.body).metadata()).format).toBe('png');
    expect(limits()).toEqual(LIBVIPS_CACHE);
  }, 600_000);
});
