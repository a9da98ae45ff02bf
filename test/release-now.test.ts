import express from 'express';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { routeMiddleware } from '../src/adapters/express.js';
import type { CoreResponse } from '../src/core/http-types.js';
import { renderOutput } from '../src/core/image/output.js';
import { probeImage, segment, type MaskModel } from '../src/core/image/pipeline.js';
import { PixelPool } from '../src/core/image/pixel-pool.js';
import { ISNET_PROFILE } from '../src/core/image/profile.js';
import { DEFAULT_OUTPUT } from '../src/core/output-options.js';
import { releaseNow } from '../src/util/release-now.js';
import { youngCollections } from '../src/util/young-garbage.js';
import { objectOnTexture } from './helpers/synthetic-image.js';

/**
 * The main thread's large buffers that a request alone holds go back as soon as it is done with
 * them, not at V8's next collection of the host's thread (docs/benchmarks.md, "Memory: what
 * holds it"): the model call's message once answered, the segmentation's model-size buffers
 * (moved to the render's worker, not copied), the response body once written. A released
 * buffer reads as empty (its ArrayBuffer detached); anything not the request's own is left as is.
 */
describe('releaseNow', () => {
  it('frees a buffer that has its memory to itself, and nothing else', () => {
    const own = Buffer.allocUnsafeSlow(1 << 20).fill(7);
    expect(releaseNow(own)).toBe(true);
    expect(own.length).toBe(0);
    expect(own.buffer.byteLength).toBe(0);

    const whole = Buffer.allocUnsafeSlow(1 << 20).fill(1);
    const view = whole.subarray(16);
    expect(releaseNow(view)).toBe(false);
    expect(whole.length).toBe(1 << 20);
    // Up to `slack` bytes that the view leaves out (a message's alignment padding): released.
    expect(releaseNow(view, 16)).toBe(true);
    expect(whole.length).toBe(0);

    const shared = Buffer.from(new SharedArrayBuffer(1 << 20));
    expect(releaseNow(shared)).toBe(false);
    expect(shared.length).toBe(1 << 20);
    const small = Buffer.from('a pooled small buffer');
    expect(releaseNow(small)).toBe(false);
    expect(small.toString()).toBe('a pooled small buffer');
  });
});

const limits = { maxInputPixels: 50_000_000 };
const render = { pngCompressionLevel: 4, maxOutputPixels: Infinity, foregroundEstimation: true };
const pool = new PixelPool({ threads: 1 });
afterAll(() => pool.close());

/** A stand-in for the model (a disc), with a prefix so its input is written into a message of its own, as the gRPC client's is. */
function discModel(seen: Buffer[]): MaskModel {
  const call: MaskModel = async (input) => {
    if ('message' in input) seen.push(input.message);
    const { width, height } = ISNET_PROFILE;
    const mask = new Uint8Array(width * height);
    for (let y = 0; y < height; y++) for (let x = 0; x < width; x++) mask[y * width + x] = Math.hypot(x - width / 2, y - height / 2) < width * 0.3 ? 255 : 0;
    return { mask };
  };
  return Object.assign(call, { prefix: () => new Uint8Array([0x0a, 0x01, 0x61]) });
}

describe('a cutout frees its own buffers', () => {
  it('segment() releases the model call\'s message once answered and collects the young generation; the render takes the segmentation\'s buffers without copying them', async () => {
    const image = await objectOnTexture(640, 480);
    const probe = await probeImage(image.bytes, limits);
    const messages: Buffer[] = [];
    const collectionsBefore = youngCollections;
    const seg = await segment(image.bytes, probe, ISNET_PROFILE, discModel(messages), limits, AbortSignal.timeout(30_000), false, pool);
    expect(messages).toHaveLength(1);
    expect(messages[0]!.length).toBe(0);
    // And the young generation was collected then (grpc-js's framed copy and the answer's buffers, in a real call).
    expect(youngCollections).toBe(collectionsBefore + 1);

    const kept = await segment(image.bytes, probe, ISNET_PROFILE, discModel([]), limits, AbortSignal.timeout(30_000), false, pool);
    const copied = await renderOutput(kept, DEFAULT_OUTPUT, render, pool);
    // Without giveUp the segmentation is still whole afterwards (a caller may render it again).
    expect(kept.model.rgb.length).toBe(ISNET_PROFILE.width * ISNET_PROFILE.height * 3);
    const moved = await renderOutput(seg, DEFAULT_OUTPUT, render, pool, undefined, undefined, undefined, true);
    expect(seg.model.rgb.length).toBe(0);
    expect(seg.mask.grey.length).toBe(0);
    expect(moved.body.equals(copied.body)).toBe(true);
  });
});

describe('the Express adapter frees a body it alone holds once written', () => {
  async function serve(wrapEnd: boolean) {
    const body = Buffer.allocUnsafeSlow(256 * 1024).fill(42);
    let released = false;
    const response: CoreResponse = { status: 200, headers: { 'content-type': 'application/octet-stream' }, body, release: () => (released = releaseNow(body)) };
    const app = express();
    if (wrapEnd) {
      // A host middleware that wraps the response's writes (as compression does) may hold the body.
      app.use((_req, res, next) => {
        const end = res.end.bind(res);
        res.end = ((...args: Parameters<typeof end>) => end(...args)) as typeof res.end;
        next();
      });
    }
    app.post('/cut', routeMiddleware(async () => response));
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    try {
      const answer = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/cut`, { method: 'POST', body: 'x' });
      const received = Buffer.from(await answer.arrayBuffer());
      expect(received.length).toBe(256 * 1024);
      expect(received.every((b) => b === 42)).toBe(true);
      // 'finish' comes once the last write was handed to the socket, before or about when the client has it all.
      await new Promise((resolve) => setTimeout(resolve, 50));
      return { released, bodyLength: body.length };
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  }

  it('releases it after the response finished', async () => {
    expect(await serve(false)).toEqual({ released: true, bodyLength: 0 });
  });

  it('leaves it to the collector when a middleware wrapped the response\'s end', async () => {
    expect(await serve(true)).toEqual({ released: false, bodyLength: 256 * 1024 });
  });
});
