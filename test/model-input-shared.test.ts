import { afterAll, describe, expect, it } from 'vitest';
import { enlargeBicubic } from '../src/core/image/bicubic-enlarge.js';
import { prepareModelInput } from '../src/core/image/model-input.js';
import { probeImage } from '../src/core/image/pipeline.js';
import { PixelPool } from '../src/core/image/pixel-pool.js';
import { ISNET_PROFILE } from '../src/core/image/profile.js';
import { isShared, sharedBuffer } from '../src/core/image/shared-bytes.js';
import { objectOnTexture } from './helpers/synthetic-image.js';

/**
 * A photo under the model's size on an axis (1224x816 against ISNet's 1024x1024: the height
 * grows) is enlarged by the project's kernel, which writes the model-size image itself. In the
 * pool's worker it writes it straight into shared memory, where the image goes anyway (for the
 * render and the working view), instead of into a fresh buffer copied there after: one 3 MB
 * allocation and copy fewer per request. Asserted on the worker's count of copies into shared
 * memory and on the bytes, not on time.
 */
const pool = new PixelPool({ threads: 1 });
afterAll(() => pool.close());
const limits = { maxInputPixels: 1e7 };

describe('the model-size image is enlarged into shared memory', () => {
  it("the worker copies only the full-size decode into shared memory, and the model's image is the same bytes as made in this thread", async () => {
    const { bytes } = await objectOnTexture(1224, 816);
    const probe = await probeImage(bytes, limits);
    const job = { bytes, probe, limits, profile: ISNET_PROFILE, decodeOnce: true };
    const before = (await pool.workerKernelCalls()).sharedCopy ?? 0;
    const prepared = await pool.modelInput(job);
    const copies = ((await pool.workerKernelCalls()).sharedCopy ?? 0) - before;
    // The full-size decode is sharp's buffer (copied once); the model-size image is not copied.
    expect(copies).toBe(1);
    expect(isShared(prepared.rgb)).toBe(true);
    expect(prepared.decoded && isShared(prepared.decoded)).toBe(true);

    const here = await prepareModelInput(job);
    expect(isShared(here.rgb)).toBe(false);
    expect(prepared.rgb.equals(here.rgb)).toBe(true);
    expect(prepared.decoded!.equals(here.decoded!)).toBe(true);
  });

  it('enlargeBicubic writes into the memory it is given the bytes it returns otherwise (SIMD and JS)', () => {
    const width = 37;
    const height = 23;
    const src = Buffer.alloc(width * height * 3);
    for (let i = 0; i < src.length; i++) src[i] = (i * 97 + (i >> 3) * 13) & 255;
    for (const simd of [true, false]) {
      const fresh = enlargeBicubic(src, width, height, 3, 64, 50, { simd });
      const into = sharedBuffer(64 * 50 * 3);
      const written = enlargeBicubic(src, width, height, 3, 64, 50, { simd, into });
      expect(written.buffer, `simd ${simd}: the given memory`).toBe(into.buffer);
      expect(written.equals(fresh), `simd ${simd}`).toBe(true);
      expect(() => enlargeBicubic(src, width, height, 3, 64, 50, { simd, into: sharedBuffer(10) })).toThrow(RangeError);
    }
  });
});
