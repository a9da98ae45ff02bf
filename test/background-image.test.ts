/**
 * `bg_image` / `bg_image_url` (the cutout over a cover-fitted photo) and `output_size` /
 * `padding` (the subject box in an exact canvas), end to end through the real model on both
 * endpoints. Expected pixels and boxes are worked out here from the geometry (cover-fit of a
 * striped photo of known colours; the fit of the model's box into the padded canvas), not read
 * from the code under test.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { createExpressApp } from '../examples/express-app.js';
import { createRemoveBgHandler, type RemoveBgHandler } from '../src/core/index.js';
import type { Resolver } from '../src/core/image-url/options.js';
import { paddedPlacement } from '../src/core/image/place.js';
import { DEFAULT_OUTPUT, parseOutputOptions } from '../src/core/output-options.js';
import { flatJsonFields } from '../src/core/json-fields.js';
import { mapParameters } from '../src/core/removebg/parameters.js';
import { baseUrlOf } from './conformance/suite.js';
import { guardConnections } from './helpers/connection-guard.js';
import { createTestKeys, TEST_PLANS, type TestKeys } from './helpers/fixtures.js';
import { captureInternalError } from './helpers/log-capture.js';
import { measuredBox, objectOnTexture } from './helpers/synthetic-image.js';

// Every connection outside 127.0.0.0/8 and ::1 throws and is recorded.
const guard = guardConnections();
afterEach(() => expect(guard.attempts, 'connections attempted outside the loopback range').toEqual([]));
afterAll(() => guard.restore());

/** The backdrop: 400 x 100, eight vertical stripes 50 px wide, each its own colour. */
const STRIPES: [number, number, number][] = [
  [255, 0, 0],
  [0, 255, 0],
  [0, 0, 255],
  [255, 255, 0],
  [0, 255, 255],
  [255, 0, 255],
  [128, 128, 128],
  [255, 128, 0],
];
const BG = { width: 400, height: 100, stripe: 50 };

function stripesRaw(): Buffer {
  const data = Buffer.alloc(BG.width * BG.height * 3);
  for (let y = 0; y < BG.height; y++) {
    for (let x = 0; x < BG.width; x++) data.set(STRIPES[Math.floor(x / BG.stripe)]!, (y * BG.width + x) * 3);
  }
  return data;
}

/**
 * The backdrop's colour at output pixel (x, y) of a `width` x `height` canvas under cover-fit:
 * scaled by max(width / 400, height / 100), centred, the overflow cut. Only pixels well inside a
 * stripe are asked about (asserted), so resampling at stripe edges does not matter.
 */
function coverColour(x: number, width: number, height: number): [number, number, number] {
  const scale = Math.max(width / BG.width, height / BG.height);
  const offset = (BG.width * scale - width) / 2;
  const bx = (x + 0.5 + offset) / scale - 0.5;
  const inStripe = bx - Math.floor(bx / BG.stripe) * BG.stripe;
  expect(inStripe > 6 && inStripe < BG.stripe - 6, `x=${x} falls ${inStripe.toFixed(1)} px into its stripe`).toBe(true);
  return STRIPES[Math.floor(bx / BG.stripe)]!;
}

describe('output_size, padding and bg_image_url: parsing', () => {
  const parse = (fields: Record<string, string>) => parseOutputOptions(fields, '/', {}).options;
  const px = (value: number) => ({ value, unit: 'px' });

  it('output_size is WxH; padding 1, 2 or 4 values; a subject box is fitted into the padded area by hand', () => {
    expect(parse({ output_size: '300x200' })).toMatchObject({ outputSize: { width: 300, height: 200 }, position: { x: 50, y: 50 } });
    expect(parse({ output_size: '300x200', padding: '10px 5%' }).padding).toEqual({ top: px(10), right: { value: 5, unit: '%' }, bottom: px(10), left: { value: 5, unit: '%' } });
    // 100 x 50 box into 300 x 200 with 10% padding: inner 240 x 160 at (30, 20); fit factor min(2.4, 3.2) = 2.4 -> 240 x 120, centred: top 20 + 20.
    const fitted = paddedPlacement(100, 50, 300, 200, parse({ output_size: '300x200', padding: '10%' }));
    expect(fitted).toEqual({ left: 30, top: 40, width: 240, height: 120 });
    // Per side: inner 140 x 160 at (40, 10); a 50 x 100 box scales by min(2.8, 1.6) = 1.6 -> 80 x 160, at the inner area's bottom-left.
    expect(paddedPlacement(50, 100, 200, 200, parse({ output_size: '200x200', padding: '10px 20px 30px 40px', position: '0% 100%' }))).toEqual({ left: 40, top: 10, width: 80, height: 160 });
    // scale shrinks within the padded area: 50% of 240 x 160 for the 100 x 50 box -> 120 x 60.
    expect(paddedPlacement(100, 50, 300, 200, parse({ output_size: '300x200', padding: '10%', scale: '50%' }))).toEqual({ left: 90, top: 70, width: 120, height: 60 });
  });

  it('bad output_size, padding and bg_image_url values are 400 invalid_option naming the option', () => {
    for (const bad of ['0x10', '10x', 'x10', '20000x10', '6000x6000', '10 x 10', '-5x5', 'big']) expect(() => parse({ output_size: bad }), bad).toThrow(/^output_size: /);
    expect(() => parse({ padding: '10px' })).toThrow(/^padding: needs output_size/);
    for (const bad of ['50%', '1px 2px 3px', '10pt', '20000px']) expect(() => parse({ output_size: '100x100', padding: bad }), bad).toThrow(/^padding: /);
    expect(() => parse({ output_size: '100x100', padding: '60px' })).toThrow(/^padding: leaves no room/);
    expect(() => parse({ output_size: '100x100', padding: '0 30% 0 20%' })).not.toThrow();
    expect(() => parse({ output_size: '100x100', padding: '0 49% 0 49%' })).not.toThrow();
    expect(() => parse({ output_size: '100x100', padding: '0 50px 0 50px' })).toThrow(/^padding: leaves no room/);
    expect(parse({ bg_image_url: ' https://example.com/b.jpg ' }).bgImageUrl).toBe('https://example.com/b.jpg');
    expect(() => parse({ bg_image_url: `https://example.com/${'a'.repeat(2100)}` })).toThrow(/^bg_image_url: /);
    expect(() => parse({ bg_image_url: 'https://example.com/b.jpg', bg_color: 'red' })).toThrow(/^bg_image_url: cannot be combined with bg_color/);
    expect(() => parse({ bg_image_url: 'https://example.com/b.jpg', channels: 'alpha' })).toThrow(/^bg_image_url: /);
    expect(() => parse({ bg_image_url: 'https://example.com/b.jpg', format: 'zip' })).toThrow(/^bg_image_url: /);
    expect(parse({}).outputSize).toBe(DEFAULT_OUTPUT.outputSize);
  });

  it("remove.bg's bg_image_url maps onto bg_image_url and makes format=auto JPEG; bg_image_file as text is a 400", () => {
    const map = (entries: Record<string, string>, file = false) => mapParameters(new Map(Object.entries(entries)), file).fields;
    expect(map({ bg_image_url: 'https://example.com/b.jpg' })).toMatchObject({ bg_image_url: 'https://example.com/b.jpg', format: 'jpg' });
    expect(map({}, true).format).toBe('jpg');
    expect(map({}).format).toBe('png');
    expect(map({ bg_image_url: 'https://example.com/b.jpg', format: 'png' }).format).toBe('png');
    expect(() => map({ bg_image_file: 'abc' })).toThrow(/bg_image_file: send it as a multipart file part/);
  });
});

describe('flatJsonFields: the one JSON body reader of both endpoints', () => {
  const limits = { maxFileBytes: 1000, maxFields: 2, maxFieldBytes: 10 };
  const read = (value: unknown, large: string[] = []) => flatJsonFields(Buffer.from(JSON.stringify(value)), limits, large);
  const codeOf = (work: () => unknown) => {
    try {
      work();
      return 'ok';
    } catch (error) {
      return (error as { code: string }).code;
    }
  };

  it('strings, numbers and booleans as text, null left out; other bodies and values refused with their codes', () => {
    expect({ ...read({ a: 'x', b: 2, c: true, d: null }) }).toEqual({ a: 'x', b: '2', c: 'true' });
    expect(codeOf(() => flatJsonFields(Buffer.from('{"a":'), limits))).toBe('malformed_json');
    expect(codeOf(() => read([1]))).toBe('malformed_json');
    expect(codeOf(() => read({ a: { b: 1 } }))).toBe('invalid_option');
    // maxFields beside the image's own field, as multipart allows beside its file.
    expect(codeOf(() => read({ a: '1', b: '2', c: '3' }))).toBe('ok');
    expect(codeOf(() => read({ a: '1', b: '2', c: '3', d: '4' }))).toBe('too_many_fields');
    expect(codeOf(() => read({ a: 'x'.repeat(11) }))).toBe('field_too_large');
    // A long signed URL (or a base64 image) is bounded by the body's size, not maxFieldBytes.
    expect(codeOf(() => read({ image_url: 'x'.repeat(500) }, ['image_url']))).toBe('ok');
  });
});

describe('bg_image, bg_image_url and output_size through the endpoints', () => {
  let keys: TestKeys;
  let handler: RemoveBgHandler;
  let api: http.Server;
  let images: http.Server;
  let imagePort = 0;
  let base: string;
  let photo: Buffer;
  let backdrop: Buffer;
  let plain: { left: number; top: number; width: number; height: number };
  let plainAlpha: Buffer;
  const dnsCalls: string[] = [];
  const table: Record<string, string> = { 'images.test': '127.0.0.1', 'intranet.test': '10.0.0.5' };
  const resolver: Resolver = async (hostname) => {
    dnsCalls.push(hostname);
    const address = table[hostname];
    if (!address) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    return [{ address, family: 4 }];
  };
  const served: string[] = [];

  beforeAll(async () => {
    keys = await createTestKeys();
    photo = (await objectOnTexture(240, 180)).bytes;
    backdrop = await sharp(stripesRaw(), { raw: { width: BG.width, height: BG.height, channels: 3 } }).png().toBuffer();
    images = http.createServer((request, response) => {
      served.push(request.url ?? '');
      response.writeHead(200, { 'content-type': 'image/png' }).end(backdrop);
    });
    images.listen(0, '127.0.0.1');
    await new Promise((resolve) => images.once('listening', resolve));
    imagePort = (images.address() as AddressInfo).port;
    handler = createRemoveBgHandler({
      keyStore: keys.store,
      plans: TEST_PLANS,
      inference: { address: inject('inferenceAddress'), timeoutMs: 120_000 },
      imageUrl: { resolver, allowLoopbackForTesting: true, allowedPorts: [imagePort] },
      limits: { maxBackgroundBytes: 100_000, maxBackgroundPixels: 50_000 },
      onInternalError: captureInternalError,
    });
    await handler.ready();
    api = createExpressApp(handler).listen(0, '127.0.0.1');
    await new Promise((resolve) => api.once('listening', resolve));
    base = baseUrlOf(api);
    const first = await cut({});
    plainAlpha = await sharp(first.body).extractChannel(3).raw().toBuffer();
    plain = measuredBox(plainAlpha, 240, 180);
  }, 180_000);

  afterAll(async () => {
    api?.closeAllConnections();
    await new Promise((resolve) => api?.close(resolve));
    images?.closeAllConnections();
    await new Promise((resolve) => images?.close(resolve));
    await handler?.close();
  });

  async function post(fields: Record<string, string>, parts: Record<string, Buffer> = {}, path = '/v1/remove-bg', filePart = 'file', headers: Record<string, string> = {}) {
    const form = new FormData();
    for (const [name, value] of Object.entries(fields)) form.append(name, value);
    form.append(filePart, new Blob([photo]), 'photo.jpg');
    for (const [name, data] of Object.entries(parts)) form.append(name.replace(/#\d$/, ''), new Blob([data]), `${name}.png`);
    const response = await fetch(`${base}${path}`, { method: 'POST', headers: { 'x-api-key': keys.good, ...headers }, body: form });
    return { status: response.status, headers: response.headers, body: Buffer.from(await response.arrayBuffer()) };
  }

  async function cut(fields: Record<string, string>, parts: Record<string, Buffer> = {}, path?: string, filePart?: string) {
    const response = await post(fields, parts, path, filePart);
    expect(response.status, response.body.toString().slice(0, 300)).toBe(200);
    const { data, info } = await sharp(response.body).raw().toBuffer({ resolveWithObject: true });
    return { ...response, data, info };
  }

  /** The four corner pixels equal the striped photo's under cover-fit (within `tolerance`); the model's haze there is near 0. */
  function expectCoverCorners(out: { data: Buffer; info: sharp.OutputInfo }, tolerance: number) {
    const { width, height, channels } = out.info;
    for (const [x, y] of [[0, 0], [width - 1, 0], [0, height - 1], [width - 1, height - 1]] as const) {
      const at = (y * width + x) * channels;
      const got = [out.data[at]!, out.data[at + 1]!, out.data[at + 2]!];
      const want = coverColour(x, width, height);
      for (let c = 0; c < 3; c++) expect(Math.abs(got[c]! - want[c]!), `corner (${x}, ${y}): got ${got} want ${want}`).toBeLessThanOrEqual(tolerance);
    }
  }

  it('bg_image: an opaque PNG whose corners are the photo cover-fitted to the canvas, the subject still in front', async () => {
    expect(Math.max(plainAlpha[0]!, plainAlpha[239]!, plainAlpha[179 * 240]!, plainAlpha[179 * 240 + 239]!)).toBeLessThanOrEqual(3);
    const out = await cut({}, { bg_image: backdrop });
    expect(out.headers.get('content-type')).toBe('image/png');
    expect([out.info.width, out.info.height, out.info.channels]).toEqual([240, 180, 3]);
    // Cover: x 1.8, 720 x 180 centred, so the corners fall in stripes 2 (left) and 5 (right), not 0 and 7 (a stretch).
    expectCoverCorners(out, 4);
    const centre = (90 * 240 + 120) * 3;
    expect(out.data[centre]!).toBeGreaterThan(out.data[centre + 1]! + 50);
  });

  it('bg_image_url: fetched from the (loopback) image host, the same bytes as the part', async () => {
    const before = served.length;
    const byUrl = await cut({ bg_image_url: `http://images.test:${imagePort}/stripes.png` });
    expect(served.length).toBe(before + 1);
    const byPart = await cut({}, { bg_image: backdrop });
    expect(byUrl.body.equals(byPart.body)).toBe(true);
  });

  it('bg_image_url at a private address is refused before any connection (the image_url policy)', async () => {
    const before = served.length;
    dnsCalls.length = 0;
    const response = await post({ bg_image_url: `http://intranet.test:${imagePort}/stripes.png` });
    expect(response.status).toBe(422);
    expect(JSON.parse(response.body.toString()).code).toBe('image_url_unreachable');
    expect(dnsCalls).toContain('intranet.test');
    // The guard (afterEach) saw no connection to 10.0.0.5; the image host got nothing.
    expect(served.length).toBe(before);
    const literal = await post({ bg_image_url: 'http://169.254.169.254/latest/meta-data' });
    expect(JSON.parse(literal.body.toString()).code).toMatch(/^image_url_/);
  });

  it('bad background images, both sources, and too many parts are refused with their codes', async () => {
    const code = async (fields: Record<string, string>, parts: Record<string, Buffer>) => {
      const response = await post(fields, parts);
      return `${response.status} ${JSON.parse(response.body.toString()).code}`;
    };
    expect(await code({}, { bg_image: Buffer.from('not an image at all') })).toBe('400 bg_image_invalid');
    const big = await sharp({ create: { width: 300, height: 300, channels: 3, background: '#123456' } }).png().toBuffer();
    expect(await code({}, { bg_image: big })).toBe('400 bg_image_too_large');
    const heavy = await sharp(Buffer.from(Array.from({ length: 200 * 200 * 3 }, (_, i) => (i * 7919) % 251)), { raw: { width: 200, height: 200, channels: 3 } }).png({ compressionLevel: 0 }).toBuffer();
    expect(heavy.length).toBeGreaterThan(100_000);
    expect(await code({}, { bg_image: heavy })).toBe('413 upload_too_large');
    expect(await code({ bg_image_url: `http://images.test:${imagePort}/s.png` }, { bg_image: backdrop })).toBe('400 bg_image_and_url');
    expect(await code({ bg_color: 'red' }, { bg_image: backdrop })).toBe('400 invalid_option');
    expect(await code({ format: 'zip' }, { bg_image: backdrop })).toBe('400 invalid_option');
    expect(await code({}, { bg_image: backdrop, 'bg_image#2': backdrop })).toBe('400 too_many_files');
    expect(await code({ output_size: '1000x1000', size: 'preview' }, {})).toBe('400 invalid_option');
    expect(await code({ output_size: '0x5' }, {})).toBe('400 invalid_option');
    // A plan that lists only `format`: the part counts as bg_image_url; output_size over its 0.05 MP output cap.
    const limited = async (fields: Record<string, string>, parts: Record<string, Buffer>) => {
      const response = await post(fields, parts, undefined, undefined, { 'x-api-key': keys.formatOnly });
      return `${response.status} ${JSON.parse(response.body.toString()).code}`;
    };
    expect(await limited({}, { bg_image: backdrop })).toBe('403 option_not_in_plan');
  });

  it('Idempotency-Key: the same key with another bg_image is another request (422), with the same one a replay', async () => {
    const key = { 'idempotency-key': `bg-${Math.random()}` };
    const first = await post({}, { bg_image: backdrop }, undefined, undefined, key);
    expect(first.status).toBe(200);
    const other = await sharp({ create: { width: 100, height: 100, channels: 3, background: '#00ff00' } }).png().toBuffer();
    const changed = await post({}, { bg_image: other }, undefined, undefined, key);
    expect(`${changed.status} ${JSON.parse(changed.body.toString()).code}`).toBe('422 idempotency_key_reused');
    const again = await post({}, { bg_image: backdrop }, undefined, undefined, key);
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
  });

  it('output_size=300x200 padding=10%: the subject box fitted into the 240 x 160 area inside the padding, centred', async () => {
    const out = await cut({ output_size: '300x200', padding: '10%' });
    expect([out.info.width, out.info.height]).toEqual([300, 200]);
    const box = measuredBox(await sharp(out.body).extractChannel(3).raw().toBuffer(), 300, 200);
    const f = Math.min(240 / plain.width, 160 / plain.height);
    expect(Math.abs(box.width - plain.width * f)).toBeLessThanOrEqual(3);
    expect(Math.abs(box.height - plain.height * f)).toBeLessThanOrEqual(3);
    expect(Math.abs(box.left + box.width / 2 - 150)).toBeLessThanOrEqual(2);
    expect(Math.abs(box.top + box.height / 2 - 100)).toBeLessThanOrEqual(2);
    expect(box.top).toBeGreaterThanOrEqual(19);
    expect(box.top + box.height).toBeLessThanOrEqual(181);
    expect(Math.abs(Number(out.headers.get('x-foreground-top')) - box.top)).toBeLessThanOrEqual(2);
  });

  it('output_size with per-side padding and position "0% 100%", over a bg_image: the box at the padded bottom-left, the photo covering the canvas', async () => {
    const out = await cut({ output_size: '100x300', padding: '10px 20px 30px 40px', position: '0% 100%' }, { bg_image: backdrop });
    expect([out.info.width, out.info.height, out.info.channels]).toEqual([100, 300, 3]);
    // Cover of a 100 x 300 canvas: x 3, 1200 x 300 centred: corners in stripes 3 and 4.
    expectCoverCorners(out, 4);
    const cutout = await cut({ output_size: '100x300', padding: '10px 20px 30px 40px', position: '0% 100%' });
    const box = measuredBox(await sharp(cutout.body).extractChannel(3).raw().toBuffer(), 100, 300);
    // The inner area is 40 x 260 at (40, 10); the box is about square, so it is 40 wide, at left 40, bottom 270.
    expect(Math.abs(box.left - 40)).toBeLessThanOrEqual(1);
    expect(Math.abs(box.top + box.height - 270)).toBeLessThanOrEqual(1);
    expect(Math.abs(box.width - 40)).toBeLessThanOrEqual(2);
  });

  it("remove.bg's route: a bg_image_file part gives a JPEG (format auto) with the photo behind", async () => {
    const out = await cut({ size: 'full' }, { bg_image_file: backdrop }, '/v1.0/removebg', 'image_file');
    expect(out.headers.get('content-type')).toBe('image/jpeg');
    expect([out.info.width, out.info.height]).toEqual([240, 180]);
    expectCoverCorners(out, 12);
  });
});
