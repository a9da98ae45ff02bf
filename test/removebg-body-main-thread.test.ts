import { randomBytes } from 'node:crypto';
import { PassThrough } from 'node:stream';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { ApiError } from '../src/core/errors.js';
import type { CoreRequest } from '../src/core/http-types.js';
import { kernelCalls } from '../src/core/image/kernel-calls.js';
import { PixelPool } from '../src/core/image/pixel-pool.js';
import { resolveImageUrlOptions } from '../src/core/image-url/options.js';
import { BODY_IN_POOL_BYTES, readRemoveBgRequest } from '../src/core/removebg/read-request.js';

/**
 * remove.bg's JSON and urlencoded bodies carry the image as base64 (`image_file_b64`). A large
 * body's parse and its base64 decode, whose costs grow with the image, run in the pixel pool, not
 * on the main thread: asserted on what the main thread ran (kernel-calls.ts's counts, and every
 * JSON.parse it made), not on time. The answers, and every error's code, status and message, are
 * the same as the main thread's reading of the same body (small bodies are still read there).
 */
const limits = { maxFileBytes: 1024 * 1024, maxFields: 20, maxFieldBytes: 1024 };
const imageUrl = { ...resolveImageUrlOptions(undefined), enabled: false };

function request(body: Buffer, contentType: string): CoreRequest {
  const stream = new PassThrough();
  stream.end(body);
  return { method: 'POST', url: '/v1.0/removebg', headers: { 'content-type': contentType, 'content-length': String(body.length) }, body: stream, signal: new AbortController().signal };
}
const json = (fields: Record<string, unknown>) => request(Buffer.from(JSON.stringify(fields)), 'application/json');
const urlencoded = (fields: Record<string, string>) => request(Buffer.from(new URLSearchParams(fields).toString()), 'application/x-www-form-urlencoded');

const main = () => ({ parse: kernelCalls.removeBgBodyParse ?? 0, decode: kernelCalls.base64Decode ?? 0, copies: kernelCalls.handOffCopy ?? 0 });

describe("remove.bg's base64 body off the main thread", () => {
  let pool: PixelPool;
  // Random bytes: the decoded image is compared byte for byte with what was sent.
  const image = randomBytes(600 * 1024);
  const b64 = image.toString('base64');
  beforeAll(() => {
    pool = new PixelPool({ threads: 1 });
  });
  afterAll(() => pool?.close());
  afterEach(() => vi.restoreAllMocks());

  it.each([
    ['JSON', () => json({ image_file_b64: b64, size: 'preview', crop: false })],
    ['urlencoded', () => urlencoded({ image_file_b64: b64, size: 'preview', crop: 'false' })],
  ])('a large %s body is parsed and its image decoded in the pool; the main thread gets the bytes and the fields', async (_kind, make) => {
    const req = make();
    expect(Number(req.headers['content-length'])).toBeGreaterThan(BODY_IN_POOL_BYTES);
    const parse = vi.spyOn(JSON, 'parse');
    const before = main();
    const workerBefore = await pool.workerKernelCalls();
    const upload = await readRemoveBgRequest(req, limits, imageUrl, AbortSignal.timeout(60_000), pool);
    expect(upload.file.equals(image)).toBe(true);
    expect(upload.removeBg.fields).toMatchObject({ crop: 'false' });
    // Nothing of the body's size was parsed, decoded or copied on this thread...
    expect(main()).toEqual(before);
    expect(parse.mock.calls.filter(([text]) => String(text).length >= BODY_IN_POOL_BYTES)).toEqual([]);
    // ...the worker did it.
    const workerAfter = await pool.workerKernelCalls();
    expect((workerAfter.removeBgBodyParse ?? 0) - (workerBefore.removeBgBodyParse ?? 0)).toBe(1);
    expect((workerAfter.base64Decode ?? 0) - (workerBefore.base64Decode ?? 0)).toBe(1);
  });

  it('a small body is still read on the main thread (a round trip costs more than its parse)', async () => {
    const before = main();
    const upload = await readRemoveBgRequest(json({ image_file_b64: 'AAAA' }), limits, imageUrl, AbortSignal.timeout(60_000), pool);
    expect(upload.file.equals(Buffer.from([0, 0, 0]))).toBe(true);
    expect(main().parse - before.parse).toBe(1);
    expect(main().decode - before.decode).toBe(1);
  });

  // Each bad large body, the code remove.bg's route answers with; the padding keeps it past the pool's threshold.
  const pad = 'A'.repeat(BODY_IN_POOL_BYTES);
  const tooBig = randomBytes(limits.maxFileBytes + 1).toString('base64');
  const bad: [string, () => CoreRequest, string][] = [
    ['not JSON', () => request(Buffer.from(`{"image_file_b64":"${pad}"`), 'application/json'), 'malformed_json'],
    ['a JSON array', () => request(Buffer.from(`["${pad}"]`), 'application/json'), 'malformed_json'],
    ['a nested value', () => json({ image_file_b64: pad, size: { a: 1 } }), 'invalid_option'],
    ['a long field', () => json({ image_file_b64: pad, bg_color: 'x'.repeat(limits.maxFieldBytes + 1) }), 'field_too_large'],
    ['too many fields', () => json({ image_file_b64: pad, ...Object.fromEntries(Array.from({ length: 25 }, (_, i) => [`f${i}`, 'x'])) }), 'too_many_fields'],
    ['bad base64', () => json({ image_file_b64: `${pad}!` }), 'malformed_base64'],
    ['an image over the limit', () => json({ image_file_b64: tooBig }), 'upload_too_large'],
    ['bad base64 and a bad parameter (the parameter is answered first)', () => json({ image_file_b64: `${pad}!`, size: 'huge' }), 'invalid_option'],
    ['base64 and image_url', () => json({ image_file_b64: `${pad}!`, image_url: 'https://example.com/a.jpg' }), 'file_and_image_url'],
    ['whitespace for an image', () => json({ image_file_b64: ' '.repeat(BODY_IN_POOL_BYTES) }), 'missing_file'],
    ['urlencoded, a field twice', () => request(Buffer.from(`image_file_b64=${pad}&size=preview&size=full`), 'application/x-www-form-urlencoded'), 'invalid_option'],
  ];
  it.each(bad)('%s: the same error from the pool as from the main thread', async (_name, make, code) => {
    const caught = (p: Promise<unknown>) => p.then(() => { throw new Error('no error'); }, (error: unknown) => error);
    const before = main();
    const fromPool = await caught(readRemoveBgRequest(make(), limits, imageUrl, AbortSignal.timeout(60_000), pool));
    expect(main().parse).toBe(before.parse);
    const onMain = await caught(readRemoveBgRequest(make(), limits, imageUrl, AbortSignal.timeout(60_000)));
    expect(fromPool).toBeInstanceOf(ApiError);
    expect(onMain).toBeInstanceOf(ApiError);
    const answer = (e: ApiError) => ({ code: e.code, status: e.status, message: e.message, headers: e.headers });
    expect(answer(fromPool as ApiError)).toEqual(answer(onMain as ApiError));
    expect((fromPool as ApiError).code).toBe(code);
  });
});
