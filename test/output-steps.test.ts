/**
 * Output steps added for remove.bg's options, on bgcut's own endpoint: `format=zip` (colour JPEG +
 * alpha PNG, read back with fflate, not with the code that wrote it) and `roi` (nothing outside
 * the region is foreground), end to end through the real model; and the region step alone.
 */
import http from 'node:http';
import { unzipSync } from 'fflate';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createExpressApp } from '../examples/express-app.js';
import { createRemoveBgHandler, type RemoveBgHandler } from '../src/core/index.js';
import { clearOutsideRegion } from '../src/core/image/roi.js';
import { parseOutputOptions } from '../src/core/output-options.js';
import { baseUrlOf } from './conformance/suite.js';
import { createTestKeys, TEST_PLANS, type TestKeys } from './helpers/fixtures.js';
import { captureInternalError } from './helpers/log-capture.js';
import { alphaIoU, objectOnTexture } from './helpers/synthetic-image.js';

describe('clearOutsideRegion', () => {
  it('clears every pixel outside the region (px and %) and none inside', () => {
    const alpha = Buffer.alloc(10 * 4, 255);
    clearOutsideRegion(alpha, 10, 4, { left: { value: 20, unit: '%' }, top: { value: 1, unit: 'px' }, right: { value: 7, unit: 'px' }, bottom: { value: 75, unit: '%' } });
    const rows = [...Array(4)].map((_, y) => [...alpha.subarray(y * 10, y * 10 + 10)].map((v) => (v ? 1 : 0)).join(''));
    expect(rows).toEqual(['0000000000', '0011111000', '0011111000', '0000000000']);
  });

  it('roi is parsed from "x1 y1 x2 y2"; bad ones are a 400 invalid_option naming roi', () => {
    expect(parseOutputOptions({ roi: '10% 0% 90px 100%' }, '/', {}).options.roi).toEqual({
      left: { value: 10, unit: '%' },
      top: { value: 0, unit: '%' },
      right: { value: 90, unit: 'px' },
      bottom: { value: 100, unit: '%' },
    });
    for (const bad of ['10% 0% 90%', '50% 0% 10% 100%', '0% 0% 120% 100%', 'a b c d', `${'1 '.repeat(5000)}`]) {
      expect(() => parseOutputOptions({ roi: bad }, '/', {}), bad.slice(0, 20)).toThrow(/^roi: /);
    }
    expect(() => parseOutputOptions({ format: 'zip', bg_color: 'red' }, '/', {})).toThrow(/^format: zip/);
  });
});

describe('format=zip and roi through the endpoint', () => {
  let keys: TestKeys;
  let handler: RemoveBgHandler;
  let server: http.Server;
  let url: string;

  beforeAll(async () => {
    keys = await createTestKeys();
    handler = createRemoveBgHandler({ keyStore: keys.store, plans: TEST_PLANS, inference: { address: inject('inferenceAddress'), timeoutMs: 30_000 }, onInternalError: captureInternalError });
    await handler.ready();
    server = createExpressApp(handler).listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    url = `${baseUrlOf(server)}/v1/remove-bg`;
  });

  afterAll(async () => {
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
    await handler?.close();
  });

  const cut = async (bytes: Buffer, fields: Record<string, string>) => {
    const form = new FormData();
    for (const [name, value] of Object.entries(fields)) form.append(name, value);
    form.append('file', new Blob([bytes]), 'photo.jpg');
    return fetch(url, { method: 'POST', headers: { 'x-api-key': keys.good }, body: form });
  };

  it('format=zip: color.jpg and a one-channel alpha.png of the input size, whose alpha is the cutout', async () => {
    const image = await objectOnTexture(240, 180);
    const response = await cut(image.bytes, { format: 'zip' });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/zip');
    expect(response.headers.get('content-disposition')).toContain('photo-nobg.zip');
    const files = Object.fromEntries(Object.entries(unzipSync(new Uint8Array(await response.arrayBuffer()))).map(([name, data]) => [name, Buffer.from(data)]));
    expect(Object.keys(files).sort()).toEqual(['alpha.png', 'color.jpg']);
    expect(await sharp(files['color.jpg']!).metadata()).toMatchObject({ format: 'jpeg', width: 240, height: 180, channels: 3 });
    expect(await sharp(files['alpha.png']!).metadata()).toMatchObject({ format: 'png', width: 240, height: 180, channels: 1 });
    const alpha = await sharp(files['alpha.png']!).extractChannel(0).raw().toBuffer({ resolveWithObject: true });
    expect(alphaIoU(alpha.data, image.truth)).toBeGreaterThan(0.9);
    // Joined as docs/api.md tells clients to: the object's colour where the mask is.
    const joined = await sharp(files['color.jpg']!).joinChannel(files['alpha.png']!).raw().toBuffer();
    const centre = (90 * 240 + 120) * 4;
    expect(joined[centre + 3]).toBeGreaterThan(200);
    expect(joined[centre]!).toBeGreaterThan(joined[centre + 1]! + 50);
  });

  it('roi: nothing outside the region is foreground, the object inside it still is', async () => {
    const image = await objectOnTexture(240, 180);
    const response = await cut(image.bytes, { roi: '0% 0% 50% 100%' });
    expect(response.status).toBe(200);
    const { data } = await sharp(Buffer.from(await response.arrayBuffer())).extractChannel(3).raw().toBuffer({ resolveWithObject: true });
    let outside = 0;
    for (let y = 0; y < 180; y++) for (let x = 120; x < 240; x++) outside = Math.max(outside, data[y * 240 + x]!);
    expect(outside).toBe(0);
    const leftTruth = image.truth.map((v, i) => (i % 240 < 120 ? v : 0));
    expect(alphaIoU(data, leftTruth)).toBeGreaterThan(0.85);
  });
});
