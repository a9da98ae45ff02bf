import { PassThrough, Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ApiError } from '../../src/core/errors.js';
import { maxBodyBytes, readUpload, type UploadLimits } from '../../src/core/multipart.js';

// readUpload alone (no server, no model): each limit's own code, the exact bounds, and the
// Content-Length pre-check that refuses an oversized upload without reading it.

const LIMITS: UploadLimits = { maxFileBytes: 1000, maxFields: 3, maxFieldBytes: 20 };
const BOUNDARY = 'unit-boundary';
const CONTENT_TYPE = `multipart/form-data; boundary=${BOUNDARY}`;

type Part = { name: string; value: string | Buffer; filename?: string };
function form(parts: Part[]): Buffer {
  const pieces: Buffer[] = [];
  for (const part of parts) {
    const disposition = `form-data; name="${part.name}"${part.filename !== undefined ? `; filename="${part.filename}"` : ''}`;
    const type = part.filename !== undefined ? '\r\nContent-Type: image/png' : '';
    pieces.push(Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: ${disposition}${type}\r\n\r\n`), Buffer.from(part.value), Buffer.from('\r\n'));
  }
  pieces.push(Buffer.from(`--${BOUNDARY}--\r\n`));
  return Buffer.concat(pieces);
}
const file = (bytes = Buffer.alloc(10, 7), filename = 'a.png'): Part => ({ name: 'file', value: bytes, filename });
const fields = (n: number, length = 1): Part[] => Array.from({ length: n }, (_, i) => ({ name: `f${i}`, value: 'x'.repeat(length) }));

const read = (body: Buffer, limits = LIMITS, headers: Record<string, string> = {}, alternative?: string) =>
  readUpload(Readable.from([body]), { 'content-type': CONTENT_TYPE, ...headers }, limits, new AbortController().signal, alternative);
const codeOf = (promise: Promise<unknown>) =>
  promise.then(
    () => 'resolved',
    (error: unknown) => (error instanceof ApiError ? error.code : `not an ApiError: ${String(error)}`),
  );

describe('readUpload: limits, each with its code', () => {
  it('reads the file, its name and type, and the fields', async () => {
    const upload = await read(form([...fields(3, 20), file(Buffer.from('abc'), 'photo.png')]));
    expect(upload).toMatchObject({ filename: 'photo.png', declaredType: 'image/png', fields: { f0: 'x'.repeat(20), f1: 'x'.repeat(20), f2: 'x'.repeat(20) } });
    expect(upload.file.toString()).toBe('abc');
  });

  it('exactly maxFields fields pass; one more is 400 too_many_fields', async () => {
    expect(Object.keys((await read(form([...fields(3), file()]))).fields)).toHaveLength(3);
    expect(await codeOf(read(form([...fields(4), file()])))).toBe('too_many_fields');
  });

  it('a field of exactly maxFieldBytes passes; one byte more is 400 field_too_large', async () => {
    expect((await read(form([{ name: 'f', value: 'y'.repeat(20) }, file()]))).fields.f).toBe('y'.repeat(20));
    const error = await read(form([{ name: 'long', value: 'y'.repeat(21) }, file()])).catch((e: ApiError) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).code).toBe('field_too_large');
    expect((error as ApiError).status).toBe(400);
  });


  it('a file of exactly maxFileBytes passes; one byte more is 413 upload_too_large', async () => {
    expect((await read(form([file(Buffer.alloc(1000, 1))]))).file.length).toBe(1000);
    expect(await codeOf(read(form([file(Buffer.alloc(1001, 1))])))).toBe('upload_too_large');
  });

  it('a second file is too_many_files; a file in another part is unexpected_file_field', async () => {
    expect(await codeOf(read(form([file(), file()])))).toBe('too_many_files');
    expect(await codeOf(read(form([{ name: 'other', value: Buffer.from('x'), filename: 'x.png' }])))).toBe('unexpected_file_field');
  });

  it('optional file parts (extraFiles, e.g. hints): read beside the file, each once and within its own size; a second "file" is still too_many_files', async () => {
    const shape = { extraFiles: { hints: 50 } };
    const withHints = (parts: Part[]) => readUpload(Readable.from([form(parts)]), { 'content-type': CONTENT_TYPE }, LIMITS, new AbortController().signal, shape);
    const hints = (bytes: Buffer): Part => ({ name: 'hints', value: bytes, filename: 'h.png' });
    const upload = await withHints([file(Buffer.from('img')), hints(Buffer.alloc(50, 2))]);
    expect(upload.file.toString()).toBe('img');
    expect(upload.parts?.hints?.file).toEqual(Buffer.alloc(50, 2));
    expect((await withHints([hints(Buffer.alloc(5, 2)), file(Buffer.from('img'))])).parts?.hints?.filename).toBe('h.png');
    expect((await withHints([file()])).parts).toBeUndefined();
    expect(await codeOf(withHints([file(), hints(Buffer.alloc(51, 2))]))).toBe('upload_too_large');
    expect(await codeOf(withHints([file(), hints(Buffer.alloc(5)), hints(Buffer.alloc(5))]))).toBe('too_many_files');
    expect(await codeOf(withHints([file(), file()]))).toBe('too_many_files');
    expect(await codeOf(withHints([file(), { name: 'other', value: Buffer.from('x'), filename: 'x.png' }]))).toBe('unexpected_file_field');
    // The image's own limit still holds when the optional part's is larger.
    const big = { extraFiles: { hints: 5000 } };
    expect(await codeOf(readUpload(Readable.from([form([file(Buffer.alloc(1001, 1))])]), { 'content-type': CONTENT_TYPE }, LIMITS, new AbortController().signal, big))).toBe('upload_too_large');
  });

  it('no file, an empty file, or "file" as a text field: 400 missing_file; image_url may stand in for the file', async () => {
    expect(await codeOf(read(form(fields(1))))).toBe('missing_file');
    expect(await codeOf(read(form([file(Buffer.alloc(0))])))).toBe('missing_file');
    expect(await codeOf(read(form([{ name: 'file', value: 'text' }])))).toBe('missing_file');
    const byUrl = await read(form([{ name: 'image_url', value: 'http://x/' }]), LIMITS, {}, 'image_url');
    expect(byUrl).toMatchObject({ filename: '', fields: { image_url: 'http://x/' } });
    expect(byUrl.file.length).toBe(0);
  });

  it('not multipart: 415 not_multipart', async () => {
    expect(await codeOf(readUpload(Readable.from([Buffer.from('x')]), { 'content-type': 'text/plain' }, LIMITS, new AbortController().signal))).toBe('not_multipart');
    expect(await codeOf(readUpload(Readable.from([Buffer.from('x')]), {}, LIMITS, new AbortController().signal))).toBe('not_multipart');
  });

  it('a multipart type without a boundary: 400 malformed_multipart', async () => {
    expect(await codeOf(readUpload(Readable.from([Buffer.from('x')]), { 'content-type': 'multipart/form-data; charset=utf-8' }, LIMITS, new AbortController().signal))).toBe(
      'malformed_multipart',
    );
  });
});

describe('readUpload: the whole body is bounded', () => {
  it('maxBodyBytes is the file, the fields and 64 KiB of framing', () => {
    expect(maxBodyBytes(LIMITS)).toBe(1000 + 3 * 20 + 64 * 1024);
  });

  it('a declared Content-Length above the bound is 413 upload_too_large before a byte is read; at the bound it is read', async () => {
    const body = new PassThrough();
    const refused = readUpload(body, { 'content-type': CONTENT_TYPE, 'content-length': String(maxBodyBytes(LIMITS) + 1) }, LIMITS, new AbortController().signal);
    expect(await codeOf(refused)).toBe('upload_too_large');
    body.write(Buffer.alloc(100));
    // Nothing reads it: no listener, not flowing, the bytes still buffered.
    expect([body.listenerCount('data'), body.readableFlowing, body.readableLength]).toEqual([0, null, 100]);
    const whole = form([file()]);
    expect((await readUpload(Readable.from([whole]), { 'content-type': CONTENT_TYPE, 'content-length': String(maxBodyBytes(LIMITS)) }, LIMITS, new AbortController().signal)).file.length).toBe(10);
  });

  it('an undeclared body larger than the bound (bytes between parts) is 413 upload_too_large', async () => {
    // Preamble before the first boundary: no part limit sees it, the byte count does.
    const body = Buffer.concat([Buffer.alloc(maxBodyBytes(LIMITS) + 1, 0x61), Buffer.from('\r\n'), form([file()])]);
    expect(await codeOf(read(body))).toBe('upload_too_large');
  });

  it('an aborted signal rejects with its reason', async () => {
    const controller = new AbortController();
    controller.abort(new ApiError('upload_timeout'));
    expect(await codeOf(readUpload(new PassThrough(), { 'content-type': CONTENT_TYPE }, LIMITS, controller.signal))).toBe('upload_timeout');
    const later = new AbortController();
    const pending = readUpload(new PassThrough(), { 'content-type': CONTENT_TYPE }, LIMITS, later.signal);
    later.abort();
    expect(await codeOf(pending)).toBe('client_closed');
  });
});
