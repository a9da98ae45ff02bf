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
import { mapParameters } from '../src/core/removebg/parameters.js';
import { baseUrlOf } from './conformance/suite.js';
import { createTestKeys, TEST_PLANS, type TestKeys } from './helpers/fixtures.js';
import { captureInternalError } from './helpers/log-capture.js';
import { alphaIoU, measuredBox, objectOnTexture } from './helpers/synthetic-image.js';

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

describe('scale, position, crop_margin and add_shadow: parsing', () => {
  const px = (value: number) => ({ value, unit: 'px' });
  it('crop_margin takes 1, 2 or 4 values in CSS order; 3 values or a bad one is a 400 naming crop_margin', () => {
    const margins = (text: string) => parseOutputOptions({ crop: 'true', crop_margin: text }, '/', {}).options.cropMargin;
    expect(margins('7px')).toEqual({ top: px(7), right: px(7), bottom: px(7), left: px(7) });
    expect(margins('10px 5%')).toEqual({ top: px(10), right: { value: 5, unit: '%' }, bottom: px(10), left: { value: 5, unit: '%' } });
    expect(margins('1px 2 3px 4px')).toEqual({ top: px(1), right: px(2), bottom: px(3), left: px(4) });
    for (const bad of ['1px 2px 3px', '1px 2px 3px 4px 5px', '600px', '10px 101%', '10pt', `${'1 '.repeat(5000)}`]) {
      expect(() => parseOutputOptions({ crop: 'true', crop_margin: bad }, '/', {}), bad.slice(0, 20)).toThrow(/^crop_margin: /);
    }
  });

  it('scale and position: values, defaults (a scale centres), and 400s naming the option', () => {
    const parse = (fields: Record<string, string>) => parseOutputOptions(fields, '/', {}).options;
    expect(parse({})).toMatchObject({ scale: null, position: 'original' });
    expect(parse({ scale: '80%' })).toMatchObject({ scale: 0.8, position: { x: 50, y: 50 } });
    expect(parse({ scale: '80%', position: 'original' })).toMatchObject({ scale: 0.8, position: 'original' });
    expect(parse({ position: '25%' })).toMatchObject({ scale: null, position: { x: 25, y: 25 } });
    expect(parse({ position: '0% 100%' })).toMatchObject({ position: { x: 0, y: 100 } });
    expect(parse({ position: 'CENTER' })).toMatchObject({ position: { x: 50, y: 50 } });
    for (const bad of ['5%', '101%', '80', 'big']) expect(() => parse({ scale: bad }), bad).toThrow(/^scale: /);
    for (const bad of ['left', '120%', '10% 20% 30%', '10px 10px']) expect(() => parse({ position: bad }), bad).toThrow(/^position: /);
    expect(parse({ add_shadow: 'true', shadow_opacity: '30' }).shadow).toEqual({ opacity: 0.3 });
    expect(() => parse({ shadow_opacity: '30' })).toThrow(/^shadow_opacity: needs add_shadow/);
    expect(() => parse({ add_shadow: 'true', shadow_opacity: '101' })).toThrow(/^shadow_opacity: /);
    expect(() => parse({ add_shadow: 'true', channels: 'alpha' })).toThrow(/^add_shadow: /);
  });

  it("remove.bg's scale, position, crop_margin and shadow parameters map onto them", () => {
    const map = (entries: Record<string, string>) => mapParameters(new Map(Object.entries(entries))).fields;
    expect(map({ scale: '75%', position: '0% 100%' })).toMatchObject({ scale: '75%', position: '0% 100%' });
    expect(map({ scale: 'original' }).scale).toBeUndefined();
    expect(map({ crop: 'true', crop_margin: '10px 20px 0 5%' }).crop_margin).toBe('10px 20px 0 5%');
    expect(map({ add_shadow: 'true', shadow_opacity: '40' })).toMatchObject({ add_shadow: 'true', shadow_opacity: '40' });
    expect(map({ add_shadow: 'false', shadow_opacity: '40' }).shadow_opacity).toBeUndefined();
    expect(() => map({ crop_margin: '1px 2px 3px' })).toThrow(/crop_margin/);
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

describe('scale, position, crop_margin and add_shadow through the endpoints', () => {
  let keys: TestKeys;
  let handler: RemoveBgHandler;
  let server: http.Server;
  let base: string;
  let image: Awaited<ReturnType<typeof objectOnTexture>>;
  /** The plain cutout's subject box: what the options move. */
  let plain: { left: number; top: number; width: number; height: number };
  let plainAlpha: Buffer;

  const cut = async (fields: Record<string, string>, path = '/v1/remove-bg', part = 'file') => {
    const form = new FormData();
    for (const [name, value] of Object.entries(fields)) form.append(name, value);
    form.append(part, new Blob([image.bytes]), 'photo.jpg');
    const response = await fetch(`${base}${path}`, { method: 'POST', headers: { 'x-api-key': keys.good }, body: form });
    const body = Buffer.from(await response.arrayBuffer());
    expect(response.status, body.toString().slice(0, 300)).toBe(200);
    const { data, info } = await sharp(body).ensureAlpha().raw().toBuffer({ resolveWithObject: true });
    const alpha = await sharp(body).ensureAlpha().extractChannel(3).raw().toBuffer();
    return { body, data, alpha, width: info.width, height: info.height, headers: response.headers };
  };

  beforeAll(async () => {
    keys = await createTestKeys();
    image = await objectOnTexture(240, 180);
    handler = createRemoveBgHandler({ keyStore: keys.store, plans: TEST_PLANS, inference: { address: inject('inferenceAddress'), timeoutMs: 30_000 }, onInternalError: captureInternalError });
    await handler.ready();
    server = createExpressApp(handler).listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    base = baseUrlOf(server);
    const first = await cut({});
    plain = measuredBox(first.alpha, first.width, first.height);
    plainAlpha = first.alpha;
    // The disc of radius 54 centred at (120, 99): the model's box is within a few px of it.
    expect(Math.abs(plain.width - 109)).toBeLessThan(8);
  });

  afterAll(async () => {
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
    await handler?.close();
  });

  it('scale=40% position="0% 100%": the subject fits 40% of the canvas, at its bottom-left corner, canvas size unchanged', async () => {
    const out = await cut({ scale: '40%', position: '0% 100%' });
    expect([out.width, out.height]).toEqual([240, 180]);
    // By hand: the box fits 96 x 72 keeping its aspect, so its height becomes 72 (it is about square).
    const f = Math.min((0.4 * 240) / plain.width, (0.4 * 180) / plain.height);
    const box = measuredBox(out.alpha, 240, 180);
    expect(Math.abs(box.width - plain.width * f)).toBeLessThanOrEqual(2);
    expect(Math.abs(box.height - plain.height * f)).toBeLessThanOrEqual(2);
    expect(box.left).toBeLessThanOrEqual(1);
    expect(Math.abs(box.top + box.height - 180)).toBeLessThanOrEqual(1);
    expect(Number(out.headers.get('x-foreground-left'))).toBeLessThanOrEqual(1);
  });

  it('scale alone centres the subject; position alone moves it without resizing', async () => {
    const centred = measuredBox((await cut({ scale: '90%' })).alpha, 240, 180);
    const f = Math.min((0.9 * 240) / plain.width, (0.9 * 180) / plain.height);
    expect(Math.abs(centred.height - plain.height * f)).toBeLessThanOrEqual(2);
    expect(Math.abs(centred.left + centred.width / 2 - 120)).toBeLessThanOrEqual(1.5);
    expect(Math.abs(centred.top + centred.height / 2 - 90)).toBeLessThanOrEqual(1.5);
    const moved = measuredBox((await cut({ position: '100% 0%' })).alpha, 240, 180);
    expect(moved).toEqual({ left: 240 - plain.width, top: 0, width: plain.width, height: plain.height });
    // The mask alone (one grey channel) moves the same way.
    const mask = await cut({ position: '100% 0%', channels: 'alpha' });
    const grey = await sharp(mask.body).extractChannel(0).raw().toBuffer();
    expect(measuredBox(grey, 240, 180)).toEqual(moved);
  });

  it('crop_margin "10px 20px 0 5px": top right bottom left around the crop, filled transparent', async () => {
    const out = await cut({ crop: 'true', crop_margin: '10px 20px 0 5px' });
    expect([out.width, out.height]).toEqual([plain.width + 20 + 5, plain.height + 10 + 0]);
    expect(measuredBox(out.alpha, out.width, out.height)).toEqual({ left: 5, top: 10, width: plain.width, height: plain.height });
  });

  it('add_shadow: a black, soft shadow below the subject, no darker than shadow_opacity, the same bytes twice', async () => {
    const a = await cut({ add_shadow: 'true', shadow_opacity: '60' });
    const b = await cut({ add_shadow: 'true', shadow_opacity: '60' });
    expect(a.body.equals(b.body)).toBe(true);
    // Just below the subject's bottom, on its centre column: the shadow (offset down 1.5% of its height).
    const x = plain.left + (plain.width >> 1);
    const below = (plain.top + plain.height + 2) * 240 + x;
    expect(a.alpha[below]).toBeGreaterThan(20);
    expect(Math.max(a.data[below * 4]!, a.data[below * 4 + 1]!, a.data[below * 4 + 2]!)).toBeLessThan(12);
    // Where only the shadow is, its alpha is proportional to shadow_opacity: half the opacity, half the alpha.
    const half = await cut({ add_shadow: 'true', shadow_opacity: '30' });
    expect(Math.abs(a.alpha[below]! - 2 * half.alpha[below]!)).toBeLessThanOrEqual(3);
    // Outside the subject's box the alpha is the shadow's alone: at most 60% of 255.
    let most = 0;
    for (let y = 0; y < 180; y++) for (let x2 = 0; x2 < 240; x2++) if (y >= plain.top + plain.height + 2 || y < plain.top - 2) most = Math.max(most, a.alpha[y * 240 + x2]!);
    expect(most).toBeGreaterThan(20);
    expect(most).toBeLessThanOrEqual(Math.round(0.6 * 255) + 1);
    // Far from the subject (the top-left corner) the alpha is the plain cutout's (the model's faint haze there, if any).
    expect(Math.abs(a.alpha[0]! - plainAlpha[0]!)).toBeLessThanOrEqual(1);
  });

  it('add_shadow over bg_color: grey under the subject, the plain colour far from it', async () => {
    const out = await cut({ add_shadow: 'true', bg_color: '#ffffff', format: 'png' });
    const x = plain.left + (plain.width >> 1);
    const below = ((plain.top + plain.height + 2) * 240 + x) * 4;
    expect(out.data[below]!).toBeLessThan(235);
    expect(out.data[0]!).toBeGreaterThan(245);
    expect(out.data[3]).toBe(255);
  });

  it("remove.bg's route honours scale and position (no longer a 400)", async () => {
    const out = await cut({ scale: '40%', position: '0% 100%', size: 'full', format: 'png' }, '/v1.0/removebg', 'image_file');
    const box = measuredBox(out.alpha, out.width, out.height);
    expect(box.left).toBeLessThanOrEqual(1);
    expect(Math.abs(box.top + box.height - out.height)).toBeLessThanOrEqual(1);
  });
});
