/**
 * remove.bg's published npm client (`remove.bg`, on unirest) and remove.bg's documented requests,
 * against bgcut's `/v1.0/removebg` on loopback. The client's endpoint is a constant
 * (https://api.remove.bg/v1.0/removebg): the test points unirest's `post` at the loopback server
 * (the one line a user would change), and a connection guard fails any connection off loopback.
 */
import express from 'express';
import http from 'node:http';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createRemoveBgRouter } from '../src/adapters/express.js';
import { createRemoveBgHandler, type RemoveBgHandler } from '../src/core/index.js';
import { createExpressApp } from '../examples/express-app.js';
import { baseUrlOf } from './conformance/suite.js';
import { guardConnections } from './helpers/connection-guard.js';
import { createTestKeys, TEST_PLANS, type TestKeys } from './helpers/fixtures.js';
import { captureInternalError } from './helpers/log-capture.js';
import { alphaIoU, decodeAlpha, objectOnTexture } from './helpers/synthetic-image.js';

const require = createRequire(import.meta.url);
interface ClientResult {
  base64img: string;
  creditsCharged: string;
  detectedType: string;
  resultWidth: string;
  resultHeight: string;
  rateLimit: string;
  rateLimitRemaining: string;
}
type ClientCall<T> = (options: T & { apiKey: string; size?: string; [option: string]: unknown }) => Promise<ClientResult>;
const removeBgClient = require('remove.bg') as {
  removeBackgroundFromImageFile: ClientCall<{ path: string }>;
  removeBackgroundFromImageBase64: ClientCall<{ base64img: string }>;
  removeBackgroundFromImageUrl: ClientCall<{ url: string }>;
};
const unirest = require('unirest') as { post: (url: string, ...rest: unknown[]) => unknown };
const REMOVE_BG_ENDPOINT = 'https://api.remove.bg/v1.0/removebg';

async function listen(app: http.RequestListener): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer(app).listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return {
    url: baseUrlOf(server),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe("remove.bg's npm client and documented requests against /v1.0/removebg", () => {
  let keys: TestKeys;
  let handler: RemoveBgHandler;
  let app: { url: string; close(): Promise<void> };
  let images: { url: string; close(): Promise<void> };
  let guard: ReturnType<typeof guardConnections>;
  let restorePost: () => void;
  let photo: Awaited<ReturnType<typeof objectOnTexture>>;
  let photoPath: string;
  const seen: string[] = [];

  beforeAll(async () => {
    keys = await createTestKeys();
    photo = await objectOnTexture(200, 150);
    images = await listen((_req, res) => res.writeHead(200, { 'content-type': 'image/jpeg' }).end(photo.bytes));
    handler = createRemoveBgHandler({
      keyStore: keys.store,
      plans: TEST_PLANS,
      inference: { address: inject('inferenceAddress'), timeoutMs: 30_000 },
      limits: { maxUploadBytes: 2 * 1024 * 1024 },
      imageUrl: { allowLoopbackForTesting: true, allowedPorts: [Number(new URL(images.url).port)] },
      onInternalError: captureInternalError,
    });
    await handler.ready();
    const express = createExpressApp(handler);
    app = await listen((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      express(req, res);
    });
    const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-removebg-'));
    photoPath = path.join(dir, 'photo.jpg');
    await writeFile(photoPath, photo.bytes);
    // The only change a remove.bg user makes: the endpoint.
    const original = unirest.post;
    unirest.post = (url: string, ...rest: unknown[]) => original(url.replace(REMOVE_BG_ENDPOINT, `${app.url}/v1.0/removebg`), ...rest);
    restorePost = () => (unirest.post = original);
    guard = guardConnections();
  });

  afterAll(async () => {
    guard?.restore();
    restorePost?.();
    await images?.close();
    await app?.close();
    await handler?.close();
  });

  it('removeBackgroundFromImageFile (multipart image_file): the cutout and remove.bg\'s result headers', async () => {
    const result = await removeBgClient.removeBackgroundFromImageFile({ path: photoPath, apiKey: keys.good, size: 'regular', type: 'auto' });
    expect(result).toMatchObject({ creditsCharged: '1', detectedType: 'other', resultWidth: '200', resultHeight: '150', rateLimit: '1000' });
    const decoded = await decodeAlpha(Buffer.from(result.base64img, 'base64'));
    expect(decoded).toMatchObject({ format: 'png', width: 200, height: 150 });
    expect(alphaIoU(decoded.alpha, photo.truth)).toBeGreaterThan(0.9);
    expect(seen.at(-1)).toBe('POST /v1.0/removebg');
  });

  it('removeBackgroundFromImageBase64 (JSON image_file_b64) with bg_color: format auto answers an opaque JPEG on that colour', async () => {
    const result = await removeBgClient.removeBackgroundFromImageBase64({ base64img: photo.bytes.toString('base64'), apiKey: keys.good, size: 'auto', bg_color: '81d4fa' });
    const jpeg = sharp(Buffer.from(result.base64img, 'base64'));
    expect(await jpeg.metadata()).toMatchObject({ format: 'jpeg', width: 200, height: 150 });
    const { data } = await jpeg.raw().toBuffer({ resolveWithObject: true });
    // A corner is background: the colour asked for (JPEG-close).
    expect(Math.abs(data[0]! - 0x81)).toBeLessThan(12);
    expect(Math.abs(data[1]! - 0xd4)).toBeLessThan(12);
    expect(Math.abs(data[2]! - 0xfa)).toBeLessThan(12);
  });

  it('removeBackgroundFromImageUrl (JSON image_url, through the image_url address policy) with crop and crop_margin', async () => {
    const result = await removeBgClient.removeBackgroundFromImageUrl({ url: `${images.url}/photo.jpg`, apiKey: keys.good, size: 'preview', crop: true, crop_margin: '10px' });
    const meta = await sharp(Buffer.from(result.base64img, 'base64')).metadata();
    // The disc is 0.6 of the height across (90 px); cropped to it plus 10 px a side.
    expect(meta.width).toBeGreaterThan(90);
    expect(meta.width).toBeLessThan(125);
    expect(Number(result.resultWidth)).toBe(meta.width);
  });

  it('removeBackgroundFromImageFile with bg_image_url: format auto answers an opaque JPEG over the fetched photo', async () => {
    // The image host answers the same 200 x 150 photo: cover-fit to a 200 x 150 canvas is the identity, so a corner is the photo's own.
    const result = await removeBgClient.removeBackgroundFromImageFile({ path: photoPath, apiKey: keys.good, size: 'full', bg_image_url: `${images.url}/backdrop.jpg` });
    const jpeg = sharp(Buffer.from(result.base64img, 'base64'));
    expect(await jpeg.metadata()).toMatchObject({ format: 'jpeg', width: 200, height: 150 });
    const { data } = await jpeg.raw().toBuffer({ resolveWithObject: true });
    const { data: original } = await sharp(photo.bytes).raw().toBuffer({ resolveWithObject: true });
    for (const at of [0, (150 * 200 - 1) * 3]) for (let c = 0; c < 3; c++) expect(Math.abs(data[at + c]! - original[at + c]!)).toBeLessThan(12);
  });

  it("a bad key: the client rejects with remove.bg's errors array (403 auth_failed)", async () => {
    await expect(removeBgClient.removeBackgroundFromImageFile({ path: photoPath, apiKey: keys.unknown })).rejects.toEqual([
      expect.objectContaining({ code: 'auth_failed', title: expect.any(String) }),
    ]);
    // The client hides the status: remove.bg's is 403 for any key problem (bgcut's own route: 401).
    const direct = await fetch(`${app.url}/v1.0/removebg`, { method: 'POST', headers: { 'x-api-key': keys.unknown, 'content-type': 'application/json' }, body: '{}' });
    expect(direct.status).toBe(403);
    await direct.arrayBuffer();
  });

  it('a documented urlencoded request (image_file_b64 percent-encoded, or with raw +) gets the cutout', async () => {
    const b64 = photo.bytes.toString('base64');
    for (const body of [new URLSearchParams({ image_file_b64: b64, size: 'preview', format: 'png' }).toString(), `image_file_b64=${b64}&size=preview`]) {
      const response = await fetch(`${app.url}/v1.0/removebg`, { method: 'POST', headers: { 'x-api-key': keys.good, 'content-type': 'application/x-www-form-urlencoded' }, body });
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toBe('image/png');
      await response.arrayBuffer();
    }
  });

  it('400s with a code, nothing charged, for bodies remove.bg would refuse', async () => {
    const cases: [Record<string, string>, string, string | RegExp][] = [
      [{ size: 'auto' }, 'missing_file', /image_file/],
      [{ image_file_b64: 'AAAA', image_url: 'https://example.com/a.jpg' }, 'file_and_image_url', /not image_file_b64 and image_url/],
      [{ image_file_b64: '!!!not base64' }, 'malformed_base64', /base64/],
      [{ image_file_b64: 'AAAA', type: 'spaceship' }, 'invalid_option', /type/],
      [{ image_file_b64: 'AAAA', bg_image_url: 'https://example.com/bg.jpg', bg_color: 'red' }, 'invalid_option', /bg_image_url: cannot be combined with bg_color/],
      [{ image_file_b64: 'AAAA', bg_image_file: 'not a file part' }, 'invalid_option', /bg_image_file: send it as a multipart file part/],
      [{ image_file_b64: 'AAAA', scale: '5%' }, 'invalid_option', /scale/],
      [{ image_file_b64: 'AAAA', colour: 'red' }, 'invalid_option', /unknown parameter/],
    ];
    for (const [body, code, detail] of cases) {
      const response = await fetch(`${app.url}/v1.0/removebg`, { method: 'POST', headers: { 'x-api-key': keys.good, 'content-type': 'application/json' }, body: JSON.stringify(body) });
      expect(response.status, code).toBe(400);
      const { errors } = (await response.json()) as { errors: { code: string; detail: string }[] };
      expect(errors[0]!.code).toBe(code);
      expect(errors[0]!.detail).toMatch(detail);
    }
    const tooBig = await fetch(`${app.url}/v1.0/removebg`, {
      method: 'POST',
      headers: { 'x-api-key': keys.good, 'content-type': 'application/json' },
      body: JSON.stringify({ image_file_b64: Buffer.alloc(3 * 1024 * 1024).toString('base64') }),
    });
    expect(tooBig.status).toBe(400);
    expect(((await tooBig.json()) as { errors: { code: string }[] }).errors[0]!.code).toBe('upload_too_large');
  });

  it('no foreground: 400 unknown_foreground, not charged; Idempotency-Key replays uncharged; then 402 insufficient_credits', async () => {
    const send = (bytes: Buffer, headers: Record<string, string> = {}) => {
      const form = new FormData();
      form.append('image_file', new Blob([bytes]), 'x.jpg');
      return fetch(`${app.url}/v1.0/removebg`, { method: 'POST', headers: { 'x-api-key': keys.oneImage, ...headers }, body: form });
    };
    const blank = await sharp({ create: { width: 120, height: 90, channels: 3, background: '#808080' } }).jpeg().toBuffer();
    const none = await send(blank);
    expect(none.status).toBe(400);
    expect(((await none.json()) as { errors: { code: string }[] }).errors[0]!.code).toBe('unknown_foreground');

    const first = await send(photo.bytes, { 'idempotency-key': 'rbg-1' });
    expect(first.status).toBe(200);
    const again = await send(photo.bytes, { 'idempotency-key': 'rbg-1' });
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(Buffer.from(await again.arrayBuffer())).toEqual(Buffer.from(await first.arrayBuffer()));

    const over = await send(photo.bytes);
    expect(over.status).toBe(402);
    expect(((await over.json()) as { errors: { code: string }[] }).errors[0]!.code).toBe('insufficient_credits');
    const account = await fetch(`${app.url}/v1.0/account`, { headers: { 'x-api-key': keys.oneImage } });
    expect(((await account.json()) as any).data.attributes.credits).toEqual({ total: 0, subscription: 0, payg: 0, enterprise: 0 });
  });

  it("a JSON or form body a host's express.json()/express.urlencoded() read first is handed back to bgcut's reader", async () => {
    const host = express();
    host.use(express.json({ limit: '5mb' }), express.urlencoded({ extended: false, limit: '5mb' }));
    host.use(createRemoveBgRouter(handler));
    const hosted = await listen(host);
    try {
      const b64 = photo.bytes.toString('base64');
      const asJson = await fetch(`${hosted.url}/v1.0/removebg`, { method: 'POST', headers: { 'x-api-key': keys.good, 'content-type': 'application/json' }, body: JSON.stringify({ image_file_b64: b64 }) });
      expect(asJson.status).toBe(200);
      await asJson.arrayBuffer();
      // Read by the host's parser, then still bound by bgcut's limits (2 MiB here).
      const big = new URLSearchParams({ image_file_b64: Buffer.alloc(3 * 1024 * 1024 - 1).toString('base64').slice(0, 4_000_000) }).toString();
      const tooBig = await fetch(`${hosted.url}/v1.0/removebg`, { method: 'POST', headers: { 'x-api-key': keys.good, 'content-type': 'application/x-www-form-urlencoded' }, body: big });
      expect(tooBig.status).toBe(400);
      expect(((await tooBig.json()) as { errors: { code: string }[] }).errors[0]!.code).toBe('upload_too_large');
    } finally {
      await hosted.close();
    }
  });

  it('made no connection outside loopback', () => {
    expect(guard.attempts).toEqual([]);
  });
});
