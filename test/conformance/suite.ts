import http from 'node:http';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createRemoveBgHandler, type RemoveBgHandler, type RemoveBgOptions } from '../../src/core/index.js';
import { probeImage } from '../../src/core/image/pipeline.js';
import { settle } from '../helpers/abort-storm.js';
import { createTestKeys, multipartBody, TEST_PLANS, type TestKeys } from '../helpers/fixtures.js';
import { startInferenceProcess } from '../helpers/inference-process.js';
import { alphaIoU, decodeAlpha, headerOnlyJpeg, objectOnTexture } from '../helpers/synthetic-image.js';
import { captureInternalError } from '../helpers/log-capture.js';
import { OpenApiResponseChecker } from '../helpers/openapi-check.js';

/** How a suite gets an app of one framework, serving the handler over real HTTP. */
export interface AdapterHarness {
  name: string;
  /** Listen on port 0 with the endpoint mounted under `prefix`; resolve with the base URL. */
  start(handler: RemoveBgHandler, prefix: string): Promise<{ url: string; close(): Promise<void> }>;
}

const MAX_UPLOAD = 2 * 1024 * 1024;

function handlerOptions(keys: TestKeys, address: string, extra: Partial<RemoveBgOptions> = {}): RemoveBgOptions {
  return {
    keyStore: keys.store,
    plans: TEST_PLANS,
    inference: { address, timeoutMs: 20_000, retryAfterSeconds: 3 },
    limits: { maxUploadBytes: MAX_UPLOAD, maxInputPixels: 30_000_000 },
    onInternalError: captureInternalError,
    // Printed, so the global log scan sees the access log too.
    onResponse: (entry) => console.log(`access ${JSON.stringify(entry)}`),
    // One image of a job at a time: on a loaded box two at once can pass the inference deadline.
    jobs: { imageConcurrency: 1 },
    ...extra,
  };
}

async function expectProblem(response: Response, status: number, code: string) {
  expect(response.status).toBe(status);
  expect(response.headers.get('content-type')).toBe('application/problem+json');
  const problem = (await response.json()) as { code: string; status: number; title: string; detail: string; type: string };
  expect(problem).toMatchObject({ code, status });
  expect(problem.title).toBeTruthy();
  expect(problem.type).toContain(code);
  return problem;
}

/** One suite, run against every adapter: what a client sees must not depend on the framework. */
export function runConformanceSuite(harness: AdapterHarness): void {
  describe(`${harness.name} adapter conformance`, () => {
    let keys: TestKeys;
    let handler: RemoveBgHandler;
    let app: { url: string; close(): Promise<void> };
    let endpoint: string;
    let checker: OpenApiResponseChecker | undefined;

    // Every response the suite gets is checked against the API's own OpenAPI document.
    const fetch = async (input: string, init?: RequestInit) => {
      const response = await globalThis.fetch(input, init);
      if (checker) {
        const body = Buffer.from(await response.clone().arrayBuffer());
        expect(checker.check(init?.method ?? 'GET', input, response.status, response.headers, body), 'conforms to /v1/openapi.json').toEqual([]);
      }
      return response;
    };

    beforeAll(async () => {
      keys = await createTestKeys();
      handler = createRemoveBgHandler(handlerOptions(keys, inject('inferenceAddress')));
      await handler.ready();
      app = await harness.start(handler, '/api');
      endpoint = `${app.url}/api/v1/remove-bg`;
      checker = new OpenApiResponseChecker(await (await fetch(`${app.url}/api/v1/openapi.json`)).json());
    });

    afterAll(async () => {
      await app?.close();
      await handler?.close();
    });

    const post = (init: { headers?: Record<string, string>; body?: BodyInit }, url = endpoint) =>
      fetch(url, { method: 'POST', ...init });

    function imageForm(bytes: Buffer, filename = 'photo.jpg', type = 'image/jpeg') {
      const form = new FormData();
      form.append('file', new Blob([bytes], { type }), filename);
      return form;
    }

    it('cuts the object out: RGBA PNG of the input size whose alpha matches the object', async () => {
      const image = await objectOnTexture(640, 480);
      const response = await post({ headers: { 'x-api-key': keys.good }, body: imageForm(image.bytes) });
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toBe('image/png');
      expect(response.headers.get('x-width')).toBe('640');
      expect(response.headers.get('x-height')).toBe('480');
      expect(response.headers.get('ratelimit-policy')).toContain('q=1000');
      const png = Buffer.from(await response.arrayBuffer());
      const decoded = await decodeAlpha(png);
      expect(decoded).toMatchObject({ format: 'png', width: 640, height: 480, channels: 4 });
      expect(alphaIoU(decoded.alpha, image.truth)).toBeGreaterThan(0.9);
    });

    it("leaves the host app's own routes and body parsers working", async () => {
      const response = await fetch(`${app.url}/echo`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ hello: 'world' }),
      });
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({ youSent: { hello: 'world' } });
    });

    describe('401 when the caller is not identified', () => {
      const cases: [string, () => Record<string, string>, string, string?][] = [
        ['no key at all', () => ({}), 'missing_api_key'],
        ['an unknown key', () => ({ 'x-api-key': keys.unknown }), 'invalid_api_key'],
        ['a malformed key', () => ({ 'x-api-key': 'not-a-key' }), 'malformed_api_key'],
        ['a key with a wrong checksum', () => ({ 'x-api-key': `${keys.good.slice(0, -1)}${keys.good.endsWith('A') ? 'B' : 'A'}` }), 'malformed_api_key'],
        ['the key under X-API-TOKEN', () => ({ 'x-api-token': keys.good }), 'api_key_wrong_header'],
        ['the key as Authorization: Bearer', () => ({ authorization: `Bearer ${keys.good}` }), 'api_key_wrong_header'],
        ['the key in the query string', () => ({}), 'api_key_wrong_header', '?api_key=KEY'],
        ['an expired key', () => ({ 'x-api-key': keys.expired }), 'expired_api_key'],
        ['a revoked key', () => ({ 'x-api-key': keys.revoked }), 'revoked_api_key'],
      ];
      it.each(cases)('%s', async (_label, headers, code, query) => {
        const image = await objectOnTexture(64, 48);
        const url = query ? `${endpoint}${query.replace('KEY', keys.good)}` : endpoint;
        const response = await post({ headers: headers(), body: imageForm(image.bytes) }, url);
        const problem = await expectProblem(response, 401, code);
        expect(response.headers.get('www-authenticate')).toMatch(/X-API-KEY/);
        expect(JSON.stringify(problem)).not.toContain(keys.good);
      });

      it('answers a large unauthenticated upload without reading it, and the client gets the status', async () => {
        const big = Buffer.alloc(8 * 1024 * 1024, 7);
        const response = await post({ headers: {}, body: imageForm(big) });
        await expectProblem(response, 401, 'missing_api_key');
      });
    });

    it('403 for a suspended account, with the account\'s rate-limit headers', async () => {
      const response = await post({ headers: { 'x-api-key': keys.suspended }, body: imageForm(Buffer.from('x')) });
      await expectProblem(response, 403, 'account_suspended');
      expect(response.headers.get('ratelimit-policy')).toBe('"minute";q=1000;w=60');
      expect(response.headers.get('x-ratelimit-remaining')).toBe('1000');
    });

    it("429 with Retry-After once the plan's per-minute limit is used", async () => {
      // Cheap requests (no body) still count against the limit.
      for (let i = 0; i < 3; i++) {
        const response = await post({ headers: { 'x-api-key': keys.tiny } });
        expect(response.status).toBe(415);
        expect(response.headers.get('x-ratelimit-remaining')).toBe(String(2 - i));
      }
      const limited = await post({ headers: { 'x-api-key': keys.tiny } });
      await expectProblem(limited, 429, 'rate_limited');
      const retryAfter = Number(limited.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThan(0);
      expect(retryAfter).toBeLessThanOrEqual(60);
      expect(limited.headers.get('x-ratelimit-remaining')).toBe('0');
    });

    it('401 multiple_api_keys for two X-API-KEY headers', async () => {
      const response = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const request = http.request(endpoint, { method: 'POST', headers: { 'x-api-key': [keys.good, keys.good], 'content-length': 0 } }, (res) => {
          let body = '';
          res.on('data', (c) => (body += c));
          res.on('end', () => {
            const headers = new Headers(Object.entries(res.headers).map(([k, v]) => [k, String(v)]));
            expect(checker!.check('POST', endpoint, res.statusCode!, headers, Buffer.from(body)), 'conforms to /v1/openapi.json').toEqual([]);
            resolve({ status: res.statusCode!, body });
          });
        });
        request.on('error', reject);
        request.end();
      });
      expect(response.status).toBe(401);
      expect(JSON.parse(response.body).code).toBe('multiple_api_keys');
    });

    describe('403 when identified but refused', () => {
      it('ip_not_allowed for a key limited to other addresses', async () => {
        const response = await post({ headers: { 'x-api-key': keys.ipLocked } });
        await expectProblem(response, 403, 'ip_not_allowed');
      });

      it('origin_not_allowed for a key limited to another origin, accepted from its own', async () => {
        const wrong = await post({ headers: { 'x-api-key': keys.originLocked, origin: 'https://evil.example' } });
        await expectProblem(wrong, 403, 'origin_not_allowed');
        const right = await post({ headers: { 'x-api-key': keys.originLocked, origin: 'https://shop.example' } });
        await expectProblem(right, 415, 'not_multipart');
      });

      it('plan_image_too_large for an image over the plan\'s megapixels', async () => {
        const image = await objectOnTexture(640, 480);
        const response = await post({ headers: { 'x-api-key': keys.smallImages }, body: imageForm(image.bytes) });
        const problem = await expectProblem(response, 403, 'plan_image_too_large');
        expect(problem.detail).toContain('0.1 MP');
      });
    });

    it('charges the monthly quota for successful cutouts only, then 429 quota_exceeded; GET /v1/account shows it', async () => {
      const image = await objectOnTexture(160, 120);
      // Passes the header probe (so the quota is reserved), then fails decoding (so it is refunded).
      const brokenBytes = headerOnlyJpeg(image.bytes);
      expect(await probeImage(brokenBytes, { maxInputPixels: 1e6 })).toMatchObject({ width: 160, height: 120 });
      await expect(sharp(brokenBytes).raw().toBuffer()).rejects.toThrow();
      const broken = await post({ headers: { 'x-api-key': keys.oneImage }, body: imageForm(brokenBytes) });
      await expectProblem(broken, 422, 'corrupt_image');
      const first = await post({ headers: { 'x-api-key': keys.oneImage }, body: imageForm(image.bytes) });
      expect(first.status).toBe(200);
      await first.arrayBuffer();
      const second = await post({ headers: { 'x-api-key': keys.oneImage }, body: imageForm(image.bytes) });
      await expectProblem(second, 429, 'quota_exceeded');
      expect(Number(second.headers.get('retry-after'))).toBeGreaterThan(0);

      const account = await fetch(`${app.url}/api/v1/account`, { headers: { 'x-api-key': keys.oneImage } });
      expect(account.status).toBe(200);
      expect(account.headers.get('x-ratelimit-limit')).toBe('1000');
      const body = (await account.json()) as any;
      expect(body.account).toEqual({ id: 'acct_one', status: 'active' });
      expect(body.plan).toMatchObject({ name: 'one_image', monthlyQuota: { unit: 'images', amount: 1 } });
      expect(body.usage).toMatchObject({ images: 1, megapixels: 0.0192 });
      expect(body.quota).toMatchObject({ used: 1, remaining: 0 });
      expect(JSON.stringify(body)).not.toContain(keys.oneImage);
    });

    it('429 concurrency_limited when the plan\'s requests in progress are all taken', async () => {
      const image = await objectOnTexture(160, 120);
      const send = () => post({ headers: { 'x-api-key': keys.oneAtATime }, body: imageForm(image.bytes) });
      const first = send();
      // Event-based: the second goes once the account's one request is in progress, as /v1/account says.
      const inProgress = async () => ((await (await fetch(`${app.url}/api/v1/account`, { headers: { 'x-api-key': keys.oneAtATime } })).json()) as { inProgress: number }).inProgress;
      await settle(inProgress, (n) => n >= 1, 30_000);
      const second = await send();
      await expectProblem(second, 429, 'concurrency_limited');
      expect((await first).status).toBe(200);
      const third = await send();
      expect(third.status).toBe(200);
    });

    describe('bad bodies each get their own status and code', () => {
      it('405 for GET, with Allow', async () => {
        const response = await fetch(endpoint, { headers: { 'x-api-key': keys.good } });
        await expectProblem(response, 405, 'method_not_allowed');
        expect(response.headers.get('allow')).toBe('POST');
      });

      it('415 not_multipart for a body neither multipart nor JSON; 400 missing_file for JSON without image_url', async () => {
        const text = await post({ headers: { 'x-api-key': keys.good, 'content-type': 'text/plain' }, body: 'file=1' });
        await expectProblem(text, 415, 'not_multipart');
        const json = await post({ headers: { 'x-api-key': keys.good, 'content-type': 'application/json' }, body: '{"file":1}' });
        await expectProblem(json, 400, 'missing_file');
      });

      it('400 missing_file for a form without a file part', async () => {
        const form = new FormData();
        form.append('note', 'hello');
        const response = await post({ headers: { 'x-api-key': keys.good }, body: form });
        await expectProblem(response, 400, 'missing_file');
      });

      it('400 unexpected_file_field for a file under another name', async () => {
        const form = new FormData();
        form.append('image', new Blob([(await objectOnTexture(64, 48)).bytes]), 'a.jpg');
        const response = await post({ headers: { 'x-api-key': keys.good }, body: form });
        await expectProblem(response, 400, 'unexpected_file_field');
      });

      it('400 too_many_files for two file parts', async () => {
        const bytes = (await objectOnTexture(64, 48)).bytes;
        const { body, contentType } = multipartBody([
          { name: 'file', filename: 'a.jpg', type: 'image/jpeg', data: bytes },
          { name: 'file', filename: 'b.jpg', type: 'image/jpeg', data: bytes },
        ]);
        const response = await post({ headers: { 'x-api-key': keys.good, 'content-type': contentType }, body });
        await expectProblem(response, 400, 'too_many_files');
      });

      it('400 malformed_multipart for a body cut off mid-part', async () => {
        const { body, contentType } = multipartBody([{ name: 'file', filename: 'a.jpg', data: Buffer.alloc(1000, 1) }]);
        const response = await post({ headers: { 'x-api-key': keys.good, 'content-type': contentType }, body: body.subarray(0, 500) });
        await expectProblem(response, 400, 'malformed_multipart');
      });

      it('413 upload_too_large for a file over the byte limit', async () => {
        const response = await post({ headers: { 'x-api-key': keys.good }, body: imageForm(Buffer.alloc(MAX_UPLOAD + 1024, 1)) });
        await expectProblem(response, 413, 'upload_too_large');
      });

      it('415 unsupported_image_type for a file that is not an image, whatever its name says', async () => {
        const response = await post({ headers: { 'x-api-key': keys.good }, body: imageForm(Buffer.from('just some text, honest\n'.repeat(50)), 'photo.jpg') });
        await expectProblem(response, 415, 'unsupported_image_type');
      });

      it('422 corrupt_image for a truncated JPEG', async () => {
        const image = await objectOnTexture(640, 480);
        const response = await post({ headers: { 'x-api-key': keys.good }, body: imageForm(image.bytes.subarray(0, image.bytes.length >> 1)) });
        await expectProblem(response, 422, 'corrupt_image');
      });

      it('413 image_too_large for a small file that declares too many pixels', async () => {
        // A 9000x9000 blank PNG compresses to a few KB but is 81 MP.
        const bomb = await sharp({ create: { width: 9000, height: 9000, channels: 3, background: '#fff' } }).png().toBuffer();
        expect(bomb.length).toBeLessThan(MAX_UPLOAD);
        const response = await post({ headers: { 'x-api-key': keys.good }, body: imageForm(bomb, 'bomb.png', 'image/png') });
        await expectProblem(response, 413, 'image_too_large');
      });
    });

    describe('output options (form fields or query parameters)', () => {
      let scene: Awaited<ReturnType<typeof objectOnTexture>>;
      beforeAll(async () => {
        scene = await objectOnTexture(320, 240);
      });
      const cut = async (fields: Record<string, string>, query = '', headers: Record<string, string> = {}) => {
        const form = imageForm(scene.bytes, 'holiday photo.jpg');
        for (const [name, value] of Object.entries(fields)) form.append(name, value);
        const response = await post({ headers: { 'x-api-key': keys.good, ...headers }, body: form }, `${endpoint}${query}`);
        return { response, body: Buffer.from(await response.arrayBuffer()) };
      };
      const pixel = async (image: Buffer, x: number, y: number) => {
        const { data, info } = await sharp(image).raw().toBuffer({ resolveWithObject: true });
        return [...data.subarray((y * info.width + x) * info.channels, (y * info.width + x + 1) * info.channels)];
      };

      it('defaults: PNG, RGBA, foreground box and file name headers', async () => {
        const { response } = await cut({});
        expect(response.status, 'status').toBe(200);
        expect(response.headers.get('content-disposition')).toBe('inline; filename="holiday photo-nobg.png"');
        const [top, left, width, height] = ['top', 'left', 'width', 'height'].map((k) => Number(response.headers.get(`x-foreground-${k}`)));
        // The disc: centre (160, 132), radius 72.
        expect(Math.abs(left! - 88)).toBeLessThanOrEqual(4);
        expect(Math.abs(top! - 60)).toBeLessThanOrEqual(4);
        expect(Math.abs(width! - 145)).toBeLessThanOrEqual(6);
        expect(Math.abs(height! - 145)).toBeLessThanOrEqual(6);
      });

      it.each([
        ['webp', 'image/webp', 4],
        ['jpg', 'image/jpeg', 3],
        ['avif', 'image/avif', 4],
      ])('format=%s', async (format, type, channels) => {
        const { response, body } = await cut({ format });
        expect(response.status).toBe(200);
        expect(response.headers.get('content-type')).toBe(type);
        const meta = await sharp(body).metadata();
        expect([meta.width, meta.height, meta.channels]).toEqual([320, 240, channels]);
        if (format === 'jpg') expect((await pixel(body, 5, 5)).every((v) => v > 240)).toBe(true); // white behind
        if (format !== 'jpg') expect((await pixel(body, 5, 5))[3]).toBe(0);
      });

      it('channels=alpha: the mask alone, one channel', async () => {
        const { response, body } = await cut({ channels: 'alpha' });
        expect(response.status).toBe(200);
        const meta = await sharp(body).metadata();
        expect([meta.width, meta.height, meta.channels]).toEqual([320, 240, 1]);
        // sharp hands one-channel images back as three unless told otherwise.
        const data = await sharp(body).extractChannel(0).raw().toBuffer();
        expect(alphaIoU(data, scene.truth)).toBeGreaterThan(0.9);
      });

      it('bg_color as hex and as a CSS name, in the query string too', async () => {
        const { body } = await cut({ bg_color: '#00ff00' });
        expect(await pixel(body, 5, 5)).toEqual([0, 255, 0]);
        const named = await cut({}, '?bg_color=rebeccapurple');
        expect(await pixel(named.body, 5, 5)).toEqual([102, 51, 153]);
        const translucent = await cut({ bg_color: '#0000ff80' });
        expect(await pixel(translucent.body, 5, 5)).toEqual([0, 0, 255, 128]);
      });

      it('crop to the foreground, with a margin', async () => {
        const { response, body } = await cut({ crop: 'true', crop_margin: '10px' });
        const meta = await sharp(body).metadata();
        expect(Math.abs(meta.width! - 165)).toBeLessThanOrEqual(8);
        expect(Math.abs(meta.height! - 165)).toBeLessThanOrEqual(8);
        expect(response.headers.get('x-foreground-left')).toBe('10');
        expect(response.headers.get('x-foreground-top')).toBe('10');
        expect(response.headers.get('x-width')).toBe(String(meta.width));
      });

      it('size=preview keeps within 0.25 MP', async () => {
        const big = await objectOnTexture(1200, 800);
        const form = imageForm(big.bytes);
        form.append('size', 'preview');
        const response = await post({ headers: { 'x-api-key': keys.good }, body: form });
        const meta = await sharp(Buffer.from(await response.arrayBuffer())).metadata();
        expect(meta.width! * meta.height!).toBeLessThanOrEqual(250_000);
        expect(Math.abs(meta.width! / meta.height! - 1.5)).toBeLessThan(0.01);
      });

      it('Accept: application/json returns the image base64 with its size and box', async () => {
        const { response, body } = await cut({ format: 'webp' }, '', { accept: 'application/json' });
        expect(response.headers.get('content-type')).toBe('application/json');
        const json = JSON.parse(body.toString());
        expect(json).toMatchObject({ contentType: 'image/webp', width: 320, height: 240, filename: 'holiday photo-nobg.webp' });
        expect(json.foreground.width).toBeGreaterThan(100);
        expect((await sharp(Buffer.from(json.data, 'base64')).metadata()).format).toBe('webp');
      });

      it.each([
        [{ format: 'gif' }, 'format'],
        [{ channels: 'rgb' }, 'channels'],
        [{ bg_color: 'not-a-colour' }, 'bg_color'],
        [{ crop_margin: '10px' }, 'crop_margin'],
        [{ crop: 'true', crop_margin: '900px' }, 'crop_margin'],
        [{ size: 'huge' }, 'size'],
        [{ colour: 'red' }, 'colour'],
      ])('400 invalid_option naming the field for %j', async (fields, field) => {
        const { response, body } = await cut(fields as Record<string, string>);
        expect(response.status).toBe(400);
        const problem = JSON.parse(body.toString());
        expect(problem.code).toBe('invalid_option');
        expect(problem.detail.startsWith(`${field}:`)).toBe(true);
      });

      it('400 for an invalid query option before the upload is read', async () => {
        const response = await post({ headers: { 'x-api-key': keys.good }, body: imageForm(Buffer.alloc(10)) }, `${endpoint}?format=bmp`);
        await expectProblem(response, 400, 'invalid_option');
      });

      it('403 option_not_in_plan for an option or an output size the plan leaves out', async () => {
        const form = imageForm(scene.bytes);
        form.append('crop', 'true');
        const refused = await post({ headers: { 'x-api-key': keys.formatOnly }, body: form });
        const problem = await expectProblem(refused, 403, 'option_not_in_plan');
        expect(problem.detail).toContain('crop');
        const full = await post({ headers: { 'x-api-key': keys.formatOnly }, body: imageForm(scene.bytes) }, `${endpoint}?format=png`);
        // size=auto (the default) scales down to the plan's 0.05 MP.
        expect(full.status).toBe(200);
        const meta = await sharp(Buffer.from(await full.arrayBuffer())).metadata();
        expect(meta.width! * meta.height!).toBeLessThanOrEqual(50_000);
      });

      it('an image with no foreground: 200, fully transparent, an empty foreground box', async () => {
        const blank = await sharp({ create: { width: 200, height: 150, channels: 3, background: '#808080' } }).jpeg().toBuffer();
        const response = await post({ headers: { 'x-api-key': keys.good }, body: imageForm(blank) });
        expect(response.status).toBe(200);
        expect(response.headers.get('x-foreground-width')).toBe('0');
        const decoded = await decodeAlpha(Buffer.from(await response.arrayBuffer()));
        expect(Math.max(...decoded.alpha)).toBeLessThan(13);
      });
    });

    describe("remove.bg's wire format at /v1.0/removebg", () => {
      const removeBgUrl = () => `${app.url}/api/v1.0/removebg`;

      it('multipart image_file with size=auto: the cutout with X-Width, X-Type, X-Credits-Charged and the rate-limit headers', async () => {
        const image = await objectOnTexture(320, 240);
        const form = new FormData();
        form.append('size', 'auto');
        form.append('image_file', new Blob([image.bytes], { type: 'image/jpeg' }), 'photo.jpg');
        // X-Api-Key as remove.bg spells it: HTTP names are case-insensitive.
        const response = await post({ headers: { 'X-Api-Key': keys.good }, body: form }, removeBgUrl());
        expect(response.status).toBe(200);
        expect(response.headers.get('content-type')).toBe('image/png');
        expect(response.headers.get('x-width')).toBe('320');
        expect(response.headers.get('x-height')).toBe('240');
        expect(response.headers.get('x-type')).toBe('other');
        expect(response.headers.get('x-credits-charged')).toBe('1');
        expect(response.headers.get('x-ratelimit-limit')).toBe('1000');
        const decoded = await decodeAlpha(Buffer.from(await response.arrayBuffer()));
        expect(alphaIoU(decoded.alpha, image.truth)).toBeGreaterThan(0.9);
      });

      it('JSON image_file_b64 with Accept: application/json: { data: { result_b64, foreground_* } } matching the X-Foreground headers', async () => {
        const image = await objectOnTexture(320, 240);
        const response = await post(
          {
            headers: { 'x-api-key': keys.good, 'content-type': 'application/json', accept: 'application/json' },
            body: JSON.stringify({ image_file_b64: image.bytes.toString('base64'), size: 'preview', crop: false }),
          },
          removeBgUrl(),
        );
        expect(response.status).toBe(200);
        const { data } = (await response.json()) as { data: Record<string, string | number> };
        expect(data.foreground_width).toBe(Number(response.headers.get('x-foreground-width')));
        expect(data.foreground_top).toBe(Number(response.headers.get('x-foreground-top')));
        expect(data.foreground_width).toBeGreaterThan(0);
        const png = await sharp(Buffer.from(data.result_b64 as string, 'base64')).metadata();
        expect(png).toMatchObject({ format: 'png', width: 320, height: 240 });
      });

      it("remove.bg's errors: 403 auth_failed without a key, 400 for a bad size, as { errors: [{ title, code, detail }] }", async () => {
        const noKey = await post({ headers: { 'content-type': 'application/json' }, body: JSON.stringify({ image_url: 'https://example.com/a.jpg' }) }, removeBgUrl());
        expect(noKey.status).toBe(403);
        expect(noKey.headers.get('content-type')).toBe('application/json');
        expect(((await noKey.json()) as any).errors[0]).toMatchObject({ code: 'auth_failed', title: expect.any(String) });
        const badSize = await post({ headers: { 'x-api-key': keys.good, 'content-type': 'application/json' }, body: JSON.stringify({ image_file_b64: 'AAAA', size: 'huge' }) }, removeBgUrl());
        expect(badSize.status).toBe(400);
        expect(((await badSize.json()) as any).errors[0]).toMatchObject({ code: 'invalid_option', detail: expect.stringContaining('size') });
      });

      it("GET /v1.0/account: remove.bg's account document from the plan and usage", async () => {
        const response = await fetch(`${app.url}/api/v1.0/account`, { headers: { 'x-api-key': keys.good } });
        expect(response.status).toBe(200);
        expect(await response.json()).toEqual({ data: { attributes: { credits: { total: null, subscription: null, payg: 0, enterprise: 0 }, api: { free_calls: 0, sizes: 'all' } } } });
      });
    });

    it('answers 503 with Retry-After, never hangs, while the inference server is down, and recovers', async () => {
      let inference = await startInferenceProcess();
      const ownHandler = createRemoveBgHandler(handlerOptions(keys, inference.address));
      const ownApp = await harness.start(ownHandler, '');
      const url = `${ownApp.url}/v1/remove-bg`;
      const image = await objectOnTexture(320, 240);
      try {
        const before = await post({ headers: { 'x-api-key': keys.good }, body: imageForm(image.bytes) }, url);
        expect(before.status).toBe(200);

        await inference.stop();
        const started = Date.now();
        const during = await post({ headers: { 'x-api-key': keys.good }, body: imageForm(image.bytes) }, url);
        await expectProblem(during, 503, 'inference_unavailable');
        expect(Number(during.headers.get('retry-after'))).toBe(3);
        expect(Date.now() - started).toBeLessThan(20_000);

        inference = await startInferenceProcess(['--port', String(inference.port)]);
        let status = 0;
        for (let attempt = 0; attempt < 40 && status !== 200; attempt++) {
          const after = await post({ headers: { 'x-api-key': keys.good }, body: imageForm(image.bytes) }, url);
          status = after.status;
          await after.arrayBuffer();
          if (status !== 200) await new Promise((r) => setTimeout(r, 500));
        }
        expect(status).toBe(200);
      } finally {
        await ownApp.close();
        await ownHandler.close();
        await inference.stop();
      }
    }, 120_000);

    it('jobs: POST /v1/jobs under the prefix answers 202 with Location; status, result and ZIP follow; unknown ids 404', async () => {
      const image = await objectOnTexture(96, 72);
      const form = imageForm(image.bytes, 'one.png', 'image/png');
      form.append('file', new Blob([image.bytes], { type: 'image/png' }), 'two.png');
      const accepted = await post({ headers: { 'x-api-key': keys.good }, body: form }, `${app.url}/api/v1/jobs`);
      expect(accepted.status).toBe(202);
      const { id } = (await accepted.json()) as { id: string };
      expect(accepted.headers.get('location')).toBe(`/api/v1/jobs/${id}`);
      let job: { state: string; images: { state: string; error?: { code: string } }[] };
      do {
        await new Promise((r) => setTimeout(r, 100));
        job = (await (await fetch(`${app.url}/api/v1/jobs/${id}`, { headers: { 'x-api-key': keys.good } })).json()) as typeof job;
      } while (job.state === 'queued' || job.state === 'running');
      expect(job.images.map((i) => `${i.state}${i.error ? ` ${i.error.code}` : ''}`)).toEqual(['done', 'done']);
      const result = await fetch(`${app.url}/api/v1/jobs/${id}/results/1`, { headers: { 'x-api-key': keys.good } });
      expect(result.status).toBe(200);
      expect((await decodeAlpha(Buffer.from(await result.arrayBuffer()))).width).toBe(96);
      const zip = await fetch(`${app.url}/api/v1/jobs/${id}/results`, { headers: { 'x-api-key': keys.good } });
      expect([zip.status, zip.headers.get('content-type')]).toEqual([200, 'application/zip']);
      await zip.arrayBuffer();
      await expectProblem(await fetch(`${app.url}/api/v1/jobs/00000000-0000-4000-8000-000000000000`, { headers: { 'x-api-key': keys.good } }), 404, 'job_not_found');
      await expectProblem(await fetch(`${app.url}/api/v1/jobs/${id}`, { headers: { 'x-api-key': keys.tiny } }), 404, 'job_not_found');
      await expectProblem(await post({ headers: { 'x-api-key': keys.good }, body: new FormData() }, `${app.url}/api/v1/jobs`), 400, 'batch_empty');
    }, 120_000);

    it('checked every response above against /v1/openapi.json', () => {
      expect(checker!.checked).toBeGreaterThan(40);
    });
  });
}

/** Resolves with the base URL of a Node server listening on a free loopback port. */
export function baseUrlOf(server: http.Server): string {
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('server is not listening on TCP');
  return `http://127.0.0.1:${address.port}`;
}
