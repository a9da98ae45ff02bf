import { randomBytes } from 'node:crypto';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError } from '../src/core/errors.js';
import type { CoreRequest } from '../src/core/http-types.js';
import { kernelCalls } from '../src/core/image/kernel-calls.js';
import { PixelPool } from '../src/core/image/pixel-pool.js';
import { resolveImageUrlOptions } from '../src/core/image-url/options.js';
import { readUpload, STREAMED_FIELD } from '../src/core/multipart.js';
import { base64Length, BODY_IN_POOL_BYTES, readRemoveBgRequest } from '../src/core/removebg/read-request.js';

/**
 * remove.bg's multipart `image_file_b64` is a text field of up to ~33 MB. busboy builds a text
 * field into one string on the event loop, and the base64 decode came after it there too: the
 * field is streamed into one buffer like a file instead (multipart-streamed-field.ts), and a large
 * one decoded in the pixel pool. Asserted on what runs where (the main thread's decode count, the
 * form's streamed bytes), not on time. Every answer is the same as the field read whole: a part
 * that names its own charset is still read whole (busboy's field), so the same text sent both
 * ways must give the same image or the same error code, status and message.
 */
const limits = { maxFileBytes: 1024 * 1024, maxFields: 5, maxFieldBytes: 1024 };
const imageUrl = { ...resolveImageUrlOptions(undefined), enabled: false };

type Part = { name: string; value: string | Buffer; filename?: string; type?: string };
function multipart(parts: Part[], declareLength = true): CoreRequest {
  const chunks: Buffer[] = [];
  for (const part of parts) {
    const disposition = `form-data; name="${part.name}"${part.filename ? `; filename="${part.filename}"` : ''}`;
    chunks.push(Buffer.from(`--XyZ\r\nContent-Disposition: ${disposition}\r\n${part.type ? `Content-Type: ${part.type}\r\n` : ''}\r\n`), Buffer.from(part.value), Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from('--XyZ--\r\n'));
  const body = Buffer.concat(chunks);
  const stream = new PassThrough();
  // In slices, as a socket delivers a large body.
  for (let i = 0; i < body.length; i += 64 * 1024) stream.write(body.subarray(i, i + 64 * 1024));
  stream.end();
  const headers: Record<string, string> = { 'content-type': 'multipart/form-data; boundary=XyZ' };
  if (declareLength) headers['content-length'] = String(body.length);
  return { method: 'POST', url: '/v1.0/removebg', headers, body: stream, signal: new AbortController().signal };
}
/** The same text as a field busboy reads whole: a part with a charset of its own is not streamed. */
const whole = (parts: Part[]) => multipart(parts.map((p) => (p.name === 'image_file_b64' ? { ...p, type: 'text/plain; charset=utf-8' } : p)));

const mainDecodes = () => kernelCalls.base64Decode ?? 0;
const caught = (p: Promise<unknown>) =>
  p.then(
    () => {
      throw new Error('no error');
    },
    (error: unknown) => error,
  );
const answer = (e: unknown) => {
  expect(e).toBeInstanceOf(ApiError);
  const error = e as ApiError;
  return { code: error.code, status: error.status, message: error.message, headers: error.headers };
};

describe("remove.bg's multipart image_file_b64: streamed, and decoded off the main thread", () => {
  let pool: PixelPool;
  const image = randomBytes(600 * 1024);
  const b64 = image.toString('base64');
  beforeAll(() => {
    pool = new PixelPool({ threads: 1 });
  });
  afterAll(() => pool?.close());

  it('the field is streamed as bytes, not built into a string (readUpload)', async () => {
    for (const declareLength of [true, false]) {
      const req = multipart([{ name: 'image_file_b64', value: b64 }, { name: 'size', value: 'preview' }], declareLength);
      const form = await readUpload(req.body, req.headers, limits, AbortSignal.timeout(60_000), {
        fileField: 'image_file',
        fileAlternatives: ['image_file_b64', 'image_url'],
        largeField: { name: 'image_file_b64', maxBytes: base64Length(limits.maxFileBytes) + 1024 },
      });
      expect(form.fields.image_file_b64).toBe(STREAMED_FIELD);
      expect(form.fields.size).toBe('preview');
      expect(form.largeFieldBytes?.equals(Buffer.from(b64)), `declared length: ${declareLength}`).toBe(true);
    }
  });

  it.each([
    ['declared length', true],
    ['chunked (no length)', false],
  ])('a large field (%s) is decoded in the pool: 0 decodes on the main thread, the same image and fields', async (_name, declareLength) => {
    const req = multipart([{ name: 'size', value: 'preview' }, { name: 'image_file_b64', value: b64 }, { name: 'crop', value: 'false' }], declareLength);
    expect(b64.length).toBeGreaterThan(BODY_IN_POOL_BYTES);
    const before = mainDecodes();
    const workerBefore = (await pool.workerKernelCalls()).base64Decode ?? 0;
    const upload = await readRemoveBgRequest(req, limits, imageUrl, AbortSignal.timeout(60_000), pool);
    expect(mainDecodes() - before).toBe(0);
    expect(((await pool.workerKernelCalls()).base64Decode ?? 0) - workerBefore).toBe(1);
    expect(upload.file.equals(image)).toBe(true);
    expect(upload.removeBg.fields).toMatchObject({ crop: 'false' });
    // The same as the field read whole.
    const read = await readRemoveBgRequest(whole([{ name: 'size', value: 'preview' }, { name: 'image_file_b64', value: b64 }, { name: 'crop', value: 'false' }]), limits, imageUrl, AbortSignal.timeout(60_000));
    expect(read.file.equals(upload.file)).toBe(true);
    expect(read.removeBg).toEqual(upload.removeBg);
  });

  it('a data: URL prefix, line breaks and a small field: the same image as read whole', async () => {
    const wrapped = `data:image/png;base64,${b64.replace(/(.{76})/g, '$1\r\n')}`;
    for (const value of [wrapped, 'AAAA']) {
      const streamed = await readRemoveBgRequest(multipart([{ name: 'image_file_b64', value }]), limits, imageUrl, AbortSignal.timeout(60_000), pool);
      const read = await readRemoveBgRequest(whole([{ name: 'image_file_b64', value }]), limits, imageUrl, AbortSignal.timeout(60_000), pool);
      expect(streamed.file.equals(read.file)).toBe(true);
      expect(streamed.file.length).toBe(value === 'AAAA' ? 3 : image.length);
    }
  });

  // Each bad form and the code it is answered with; the padding keeps the field past the pool's threshold.
  const pad = 'A'.repeat(BODY_IN_POOL_BYTES);
  const largeMax = base64Length(limits.maxFileBytes) + 1024;
  const tooBig = randomBytes(limits.maxFileBytes + 1).toString('base64');
  const five = Array.from({ length: 5 }, (_, i) => ({ name: `f${i}`, value: 'x' }));
  const bad: [string, Part[], string][] = [
    ['bad base64', [{ name: 'image_file_b64', value: `${pad}!` }], 'malformed_base64'],
    ['a non-ASCII byte', [{ name: 'image_file_b64', value: Buffer.concat([Buffer.from(pad), Buffer.from([0xa0])]) }], 'malformed_base64'],
    ['an image over the limit', [{ name: 'image_file_b64', value: tooBig }], 'upload_too_large'],
    ['a field over its limit', [{ name: 'image_file_b64', value: 'A'.repeat(largeMax + 1) }], 'field_too_large'],
    ['bad base64 and a bad parameter (the parameter is answered first)', [{ name: 'image_file_b64', value: `${pad}!` }, { name: 'size', value: 'huge' }], 'invalid_option'],
    ['base64 and image_url', [{ name: 'image_file_b64', value: pad }, { name: 'image_url', value: 'https://example.com/a.jpg' }], 'file_and_image_url'],
    ['base64 and image_file', [{ name: 'image_file', value: Buffer.from('abc'), filename: 'a.jpg', type: 'image/jpeg' }, { name: 'image_file_b64', value: pad }], 'file_and_image_url'],
    ['whitespace for an image', [{ name: 'image_file_b64', value: ' '.repeat(BODY_IN_POOL_BYTES) }], 'missing_file'],
    ['an empty field', [{ name: 'image_file_b64', value: '' }], 'missing_file'],
    ['five fields and the base64 (six)', [...five, { name: 'image_file_b64', value: pad }], 'too_many_fields'],
    ['the base64 and five fields (six)', [{ name: 'image_file_b64', value: pad }, ...five], 'too_many_fields'],
    // image_file and hints are the two file parts allowed here; a third is one too many.
    ['three files and no base64', [{ name: 'image_file', value: Buffer.from('abc'), filename: 'a.jpg' }, { name: 'hints', value: Buffer.from('{}'), filename: 'h.json' }, { name: 'other', value: Buffer.from('x'), filename: 'o.bin' }], 'too_many_files'],
    ['three files beside the base64', [{ name: 'image_file_b64', value: pad }, { name: 'image_file', value: Buffer.from('abc'), filename: 'a.jpg' }, { name: 'hints', value: Buffer.from('{}'), filename: 'h.json' }, { name: 'other', value: Buffer.from('x'), filename: 'o.bin' }], 'too_many_files'],
  ];
  it.each(bad)('%s: the same answer as the field read whole, with and without the pool', async (_name, parts, code) => {
    const before = mainDecodes();
    const streamed = answer(await caught(readRemoveBgRequest(multipart(parts), limits, imageUrl, AbortSignal.timeout(60_000), pool)));
    expect(mainDecodes(), 'decodes on the main thread').toBe(before);
    expect(answer(await caught(readRemoveBgRequest(multipart(parts), limits, imageUrl, AbortSignal.timeout(60_000))))).toEqual(streamed);
    expect(answer(await caught(readRemoveBgRequest(whole(parts), limits, imageUrl, AbortSignal.timeout(60_000), pool)))).toEqual(streamed);
    expect(streamed.code).toBe(code);
  });
});
