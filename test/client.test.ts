import http from 'node:http';
import { captureInternalError } from './helpers/log-capture.js';
import { writeFile, mkdtemp } from 'node:fs/promises';
import { Readable } from 'node:stream';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  AuthenticationError,
  BgcutClient,
  BgcutTimeoutError,
  InvalidRequestError,
  PermissionDeniedError,
  RateLimitError,
  ServiceError,
  type RetryEvent,
} from '../src/client/index.js';
import { createRemoveBgHandler, type RemoveBgHandler } from '../src/core/index.js';
import { createExpressApp } from '../examples/express-app.js';
import { baseUrlOf } from './conformance/suite.js';
import { createTestKeys, TEST_PLANS, type TestKeys } from './helpers/fixtures.js';
import { alphaIoU, decodeAlpha, objectOnTexture } from './helpers/synthetic-image.js';

function listen(server: http.Server): Promise<string> {
  server.listen(0, '127.0.0.1');
  return new Promise((resolve) => server.once('listening', () => resolve(baseUrlOf(server))));
}
function close(server: http.Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

describe('client against the real API', () => {
  let keys: TestKeys;
  let handler: RemoveBgHandler;
  let server: http.Server;
  let baseUrl: string;
  let scene: Awaited<ReturnType<typeof objectOnTexture>>;

  beforeAll(async () => {
    keys = await createTestKeys();
    handler = createRemoveBgHandler({ keyStore: keys.store, plans: TEST_PLANS, inference: { address: inject('inferenceAddress') }, onInternalError: captureInternalError });
    await handler.ready();
    server = http.createServer(createExpressApp(handler, '/api'));
    baseUrl = `${await listen(server)}/api`;
    scene = await objectOnTexture(320, 240);
  });
  afterAll(async () => {
    await close(server);
    await handler.close();
  });

  it('a path: the cut-out, its size, foreground box, confidence, file name and rate-limit standing', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-client-'));
    const file = path.join(dir, 'holiday.jpg');
    await writeFile(file, scene.bytes);
    const client = new BgcutClient({ apiKey: keys.good, baseUrl });
    const cutout = await client.removeBackground(file);
    expect(cutout).toMatchObject({ contentType: 'image/png', filename: 'holiday-nobg.png', width: 320, height: 240, attempts: 1 });
    expect(cutout.rateLimit).toMatchObject({ limit: 1000 });
    expect(cutout.foreground!.width).toBeGreaterThan(100);
    expect(cutout.confidence).toBeGreaterThan(0.5);
    expect(cutout.confidence).toBeLessThanOrEqual(1);
    expect(cutout.timings.inference).toBeGreaterThan(0);
    const decoded = await decodeAlpha(Buffer.from(cutout.image));
    expect(alphaIoU(decoded.alpha, scene.truth)).toBeGreaterThan(0.9);
  });

  it('the key from BGCUT_API_KEY; no key at all is a TypeError before any request', async () => {
    const saved = process.env.BGCUT_API_KEY;
    try {
      process.env.BGCUT_API_KEY = keys.good;
      const account = await new BgcutClient({ baseUrl }).account();
      expect(account.account.id).toBe('acct_good');
      delete process.env.BGCUT_API_KEY;
      expect(() => new BgcutClient({ baseUrl })).toThrow(TypeError);
    } finally {
      if (saved === undefined) delete process.env.BGCUT_API_KEY;
      else process.env.BGCUT_API_KEY = saved;
    }
  });

  it('typed errors by problem code', async () => {
    const unknown = await new BgcutClient({ apiKey: keys.unknown, baseUrl }).removeBackground(scene.bytes).catch((e) => e);
    expect(unknown).toBeInstanceOf(AuthenticationError);
    expect(unknown).toMatchObject({ status: 401, code: 'invalid_api_key' });
    const notImage = await new BgcutClient({ apiKey: keys.good, baseUrl }).removeBackground(Buffer.from('plain text, not an image'.repeat(20))).catch((e) => e);
    expect(notImage).toBeInstanceOf(InvalidRequestError);
    expect(notImage.code).toBe('unsupported_image_type');
    const notInPlan = await new BgcutClient({ apiKey: keys.formatOnly, baseUrl }).removeBackground(scene.bytes, { crop: true }).catch((e) => e);
    expect(notInPlan).toBeInstanceOf(PermissionDeniedError);
    expect(notInPlan.code).toBe('option_not_in_plan');
  });

  it('429 whose Retry-After is past the retry budget: thrown at once, not waited for', async () => {
    const client = new BgcutClient({ apiKey: keys.tiny, baseUrl, retry: { maxElapsedMs: 2_000 } });
    for (let i = 0; i < 3; i++) await client.removeBackground(Buffer.from('x')).catch(() => {});
    const started = Date.now();
    const error = await client.removeBackground(scene.bytes).catch((e) => e);
    expect(error).toBeInstanceOf(RateLimitError);
    expect(error).toMatchObject({ code: 'rate_limited', attempts: 1 });
    expect(error.retryAfterSeconds).toBeGreaterThan(2);
    expect(Date.now() - started).toBeLessThan(2_000);
  });
});

describe('client retries, timeouts and aborts (against a scripted loopback server)', () => {
  let server: http.Server;
  let baseUrl: string;
  let script: ((res: http.ServerResponse) => void)[] = [];
  let requests = 0;
  let lastBody = Buffer.alloc(0);
  let png: Buffer;
  const problem = (res: http.ServerResponse, status: number, code: string, headers: Record<string, string> = {}) => {
    res.writeHead(status, { 'content-type': 'application/problem+json', ...headers });
    res.end(JSON.stringify({ type: `urn:bgcut:problem:${code}`, title: code, status, detail: code, code }));
  };
  const ok = (res: http.ServerResponse) => {
    res.writeHead(200, { 'content-type': 'image/png', 'x-width': '4', 'x-height': '4' });
    res.end(png);
  };

  beforeAll(async () => {
    png = await sharp({ create: { width: 4, height: 4, channels: 4, background: '#0000' } }).png().toBuffer();
    server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        lastBody = Buffer.concat(chunks);
        requests++;
        (script.shift() ?? ok)(res);
      });
    });
    baseUrl = await listen(server);
  });
  afterAll(() => close(server));

  const client = (extra: ConstructorParameters<typeof BgcutClient>[0] = {}, events: RetryEvent[] = []) =>
    new BgcutClient({ apiKey: 'bgk_test', baseUrl, random: () => 0.5, onRetry: (e) => events.push(e), ...extra });

  it('sends a Buffer, a File, a Node stream and a web stream as the file part, with the options as fields', async () => {
    const bytes = Buffer.from('0123456789'.repeat(500));
    const inputs = [bytes, new File([bytes], 'named.jpg'), Readable.from([bytes.subarray(0, 1000), bytes.subarray(1000)]), new Blob([bytes]).stream()];
    for (const [i, input] of inputs.entries()) {
      const cutout = await client().removeBackground(input, { format: 'webp', crop: true });
      expect(cutout.width).toBe(4);
      const text = lastBody.toString('latin1');
      expect(lastBody.includes(bytes), `input ${i}`).toBe(true);
      expect(text).toContain(`filename="${i === 1 ? 'named.jpg' : 'image'}"`);
      expect(text).toMatch(/name="format"\r\n\r\nwebp/);
      expect(text).toMatch(/name="crop"\r\n\r\ntrue/);
    }
  });

  it('hints (bytes or a path) go as the file part "hints" beside the image, and again on a retry', async () => {
    const image = Buffer.from('image-bytes-'.repeat(100));
    const hints = Buffer.from('hint-bytes-'.repeat(100));
    const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-client-hints-'));
    await writeFile(path.join(dir, 'strokes.png'), hints);
    for (const given of [hints, path.join(dir, 'strokes.png')]) {
      script = [(res) => problem(res, 503, 'server_busy', { 'retry-after': '0' })];
      const before = requests;
      await client().removeBackground(image, { hints: given });
      expect(requests - before).toBe(2);
      const text = lastBody.toString('latin1');
      expect(text).toMatch(/name="hints"; filename="hints.png"\r\nContent-Type: [^\r]+\r\n\r\n(hint-bytes-){100}\r\n/);
      expect(lastBody.includes(image)).toBe(true);
    }
  });

  it('503 with Retry-After: 1, twice, then 200: waits at least 1 s each time, plus at most 20 % jitter', async () => {
    requests = 0;
    script = [(res) => problem(res, 503, 'server_busy', { 'retry-after': '1' }), (res) => problem(res, 503, 'server_busy', { 'retry-after': '1' })];
    const events: RetryEvent[] = [];
    const started = Date.now();
    const cutout = await client({}, events).removeBackground(Buffer.from('img'));
    expect(cutout.attempts).toBe(3);
    expect(requests).toBe(3);
    expect(events.map((e) => [e.status, e.code, e.delayMs])).toEqual([
      [503, 'server_busy', 1100],
      [503, 'server_busy', 1100],
    ]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(2_000);
  });

  it('429 without Retry-After: exponential backoff; gives up after maxRetries with the last error', async () => {
    requests = 0;
    script = Array.from({ length: 4 }, () => (res: http.ServerResponse) => problem(res, 429, 'concurrency_limited'));
    const events: RetryEvent[] = [];
    const error = await client({ retry: { maxRetries: 3, baseDelayMs: 20 } }, events).removeBackground(Buffer.from('img')).catch((e) => e);
    expect(error).toBeInstanceOf(RateLimitError);
    expect(error.attempts).toBe(4);
    expect(events.map((e) => e.delayMs)).toEqual([15, 30, 60]); // ceilings 20, 40, 80 with jitter 0.75
  });

  it('does not retry other statuses', async () => {
    requests = 0;
    script = [(res) => problem(res, 504, 'inference_timeout')];
    const error = await client().removeBackground(Buffer.from('img')).catch((e) => e);
    expect(error).toBeInstanceOf(ServiceError);
    expect(requests).toBe(1);
  });

  it('AbortSignal: aborting during a Retry-After wait rejects at once with the abort reason', async () => {
    script = [(res) => problem(res, 503, 'server_busy', { 'retry-after': '30' })];
    const abort = new AbortController();
    const started = Date.now();
    const pending = client().removeBackground(Buffer.from('img'), { signal: abort.signal }).catch((e) => e);
    setTimeout(() => abort.abort(), 300);
    const error = await pending;
    expect(error.name).toBe('AbortError');
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('timeoutMs: an attempt that gets no answer fails with BgcutTimeoutError', async () => {
    script = [() => {}]; // never answers
    const error = await client({ timeoutMs: 300 }).removeBackground(Buffer.from('img')).catch((e) => e);
    expect(error).toBeInstanceOf(BgcutTimeoutError);
  });
});
