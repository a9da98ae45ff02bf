import express from 'express';
import type http from 'node:http';
import sharp from 'sharp';
import { crc32 } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createRemoveBgRouter } from '../src/adapters/express.js';
import { createRemoveBgHandler, type RemoveBgHandler } from '../src/core/index.js';
import { baseUrlOf } from './conformance/suite.js';
import { createTestKeys, TEST_PLANS } from './helpers/fixtures.js';
import { alphaIoU, decodeAlpha, objectOnTexture } from './helpers/synthetic-image.js';
import { captureInternalError } from './helpers/log-capture.js';

/**
 * Every kind of image people send, generated here, through the real model: the status, the
 * upright size, and where the object ends up.
 */
describe('inputs', () => {
  let handler: RemoveBgHandler;
  let server: http.Server;
  let url: string;
  let key: string;

  beforeAll(async () => {
    const keys = await createTestKeys();
    key = keys.good;
    handler = createRemoveBgHandler({
      keyStore: keys.store,
      plans: TEST_PLANS,
      inference: { address: inject('inferenceAddress') },
      limits: { maxInputPixels: 50_000_000 },
      onInternalError: captureInternalError,
    });
    await handler.ready();
    server = express().use(createRemoveBgRouter(handler)).listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    url = `${baseUrlOf(server)}/v1/remove-bg`;
  });
  afterAll(async () => {
    server?.closeAllConnections();
    server?.close();
    await handler?.close();
  });

  async function send(bytes: Buffer, filename = 'upload.bin', type = 'application/octet-stream') {
    const form = new FormData();
    form.append('file', new Blob([bytes], { type }), filename);
    const response = await fetch(url, { method: 'POST', headers: { 'x-api-key': key }, body: form });
    const body = Buffer.from(await response.arrayBuffer());
    return { status: response.status, body, headers: response.headers };
  }

  async function expectCutout(bytes: Buffer, truth: { width: number; height: number; truth: Uint8Array }, minIoU = 0.85) {
    const result = await send(bytes);
    expect(result.status, result.body.toString().slice(0, 300)).toBe(200);
    const decoded = await decodeAlpha(result.body);
    expect([decoded.width, decoded.height]).toEqual([truth.width, truth.height]);
    expect(alphaIoU(decoded.alpha, truth.truth)).toBeGreaterThan(minIoU);
    return decoded;
  }

  it('honours EXIF orientation: the cutout is upright, with the upright size', async () => {
    // The upright scene has its object in the top-left; it is stored turned a quarter and
    // tagged with orientation 6 ("rotate 90 clockwise to display"), as phones do.
    const upright = await objectOnTexture(480, 360, 'raw', { x: 0.35, y: 0.4 });
    const stored = await sharp(upright.rgb, { raw: { width: 480, height: 360, channels: 3 } })
      .rotate(-90)
      .jpeg({ quality: 92 })
      .withMetadata({ orientation: 6 })
      .toBuffer();
    const meta = await sharp(stored).metadata();
    expect([meta.width, meta.height, meta.orientation]).toEqual([360, 480, 6]);
    await expectCutout(stored, upright);
  });

  it.each([
    ['PNG', (s: sharp.Sharp) => s.png()],
    ['WebP', (s: sharp.Sharp) => s.webp({ quality: 90 })],
    ['AVIF', (s: sharp.Sharp) => s.avif({ quality: 70 })],
    ['TIFF', (s: sharp.Sharp) => s.tiff()],
    ['GIF (palette)', (s: sharp.Sharp) => s.gif()],
    ['CMYK JPEG', (s: sharp.Sharp) => s.toColourspace('cmyk').jpeg()],
    ['16-bit PNG', (s: sharp.Sharp) => s.toColourspace('rgb16').png()],
  ])('accepts %s, sniffed from the bytes', async (_label, encode) => {
    const scene = await objectOnTexture(320, 240, 'raw');
    const bytes = await encode(sharp(scene.rgb, { raw: { width: 320, height: 240, channels: 3 } })).toBuffer();
    await expectCutout(bytes, scene, 0.8);
  });

  it('channels=alpha of an opaque photo is the cutout\'s own alpha, byte for byte (made without a full-size decode)', async () => {
    const image = await objectOnTexture(900, 600);
    const post = async (query: string) => {
      const form = new FormData();
      form.append('file', new Blob([image.bytes], { type: 'image/jpeg' }), 'photo.jpg');
      const response = await fetch(`${url}?${query}`, { method: 'POST', headers: { 'x-api-key': key }, body: form });
      expect(response.status).toBe(200);
      return Buffer.from(await response.arrayBuffer());
    };
    const cutout = await sharp(await post('format=png')).extractChannel(3).raw().toBuffer({ resolveWithObject: true });
    const grey = await post('channels=alpha');
    const meta = await sharp(grey).metadata();
    expect([meta.width, meta.height, meta.channels]).toEqual([900, 600, 1]);
    const mask = await sharp(grey).extractChannel(0).raw().toBuffer({ resolveWithObject: true });
    expect(mask.data.equals(cutout.data)).toBe(true);
  });

  it('accepts grey images', async () => {
    const scene = await objectOnTexture(320, 240, 'raw');
    const grey = await sharp(scene.rgb, { raw: { width: 320, height: 240, channels: 3 } }).toColourspace('b-w').jpeg().toBuffer();
    expect((await sharp(grey).metadata()).channels).toBe(1);
    const result = await send(grey);
    expect(result.status).toBe(200);
    const decoded = await decodeAlpha(result.body);
    expect([decoded.width, decoded.height, decoded.channels]).toEqual([320, 240, 4]);
  });

  it('keeps what was transparent in the input transparent', async () => {
    const scene = await objectOnTexture(320, 240, 'raw');
    // Alpha 0 on the right quarter, which holds no object.
    const alpha = Buffer.alloc(320 * 240, 255);
    for (let y = 0; y < 240; y++) for (let x = 240; x < 320; x++) alpha[y * 320 + x] = 0;
    const rgba = await sharp(scene.rgb, { raw: { width: 320, height: 240, channels: 3 } })
      .joinChannel(alpha, { raw: { width: 320, height: 240, channels: 1 } })
      .png()
      .toBuffer();
    const decoded = await expectCutout(rgba, scene, 0.8);
    for (let y = 0; y < 240; y++) for (let x = 240; x < 320; x++) expect(decoded.alpha[y * 320 + x]).toBe(0);
  });

  it('takes the first frame of an animation, at one frame\'s size', async () => {
    const first = await objectOnTexture(200, 160, 'raw');
    const second = await objectOnTexture(200, 160, 'raw', { x: 0.3, y: 0.3 });
    const frame = (s: { rgb: Buffer }) => sharp(s.rgb, { raw: { width: 200, height: 160, channels: 3 } }).png().toBuffer();
    const animated = await sharp([await frame(first), await frame(second)], { join: { animated: true } }).gif({ delay: [100, 100] }).toBuffer();
    expect((await sharp(animated).metadata()).pages).toBe(2);
    await expectCutout(animated, first, 0.8);
  });

  it('413 image_too_large for a 1 KB file declaring 30000x30000, decided from the header', async () => {
    const bomb = pngHeaderOnly(30000, 30000);
    expect(bomb.length).toBeLessThan(1024);
    const started = Date.now();
    const result = await send(bomb, 'bomb.png', 'image/png');
    expect(result.status).toBe(413);
    expect(JSON.parse(result.body.toString()).code).toBe('image_too_large');
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it.each([
    ['SVG', Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="100" height="100"><circle cx="50" cy="50" r="40"/></svg>'), 415],
    ['PDF', Buffer.from('%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n'), 415],
    ['text named .jpg', Buffer.from('hello, this is not an image\n'.repeat(20)), 415],
  ])('refuses %s with %i', async (_label, bytes, status) => {
    const result = await send(bytes, 'photo.jpg', 'image/jpeg');
    expect(result.status).toBe(status);
    expect(JSON.parse(result.body.toString()).code).toBe('unsupported_image_type');
  });

  it('422 corrupt_image for a truncated PNG', async () => {
    const png = (await objectOnTexture(320, 240, 'png')).bytes;
    const result = await send(png.subarray(0, Math.floor(png.length * 0.6)));
    expect(result.status).toBe(422);
    expect(JSON.parse(result.body.toString()).code).toBe('corrupt_image');
  });
});

/** A PNG signature and IHDR declaring the size, then a few bytes of IDAT: a header with no picture. */
function pngHeaderOnly(width: number, height: number): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(body));
    return Buffer.concat([length, body, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.writeUInt8(8, 8); // bit depth
  ihdr.writeUInt8(2, 9); // truecolour
  const signature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  return Buffer.concat([signature, chunk('IHDR', ihdr), chunk('IDAT', Buffer.from([0x78, 0x9c, 0x00, 0x00]))]);
}

