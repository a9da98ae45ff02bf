import { getEventListeners } from 'node:events';
import { PassThrough, Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ApiError } from '../../src/core/errors.js';
import { maxBatchBodyBytes, maxBodyBytes, readBatchUpload, readUpload, STREAMED_FIELD, type BatchLimits, type UploadLimits } from '../../src/core/multipart.js';

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

// What each refusal says (its detail names the limit and the part), the other form shapes
// (another file part name, a long field, text standing in for the file), and batches of files.
const errorOf = (promise: Promise<unknown>) => promise.then(() => undefined, (error: ApiError) => error);
const readShape = (body: Buffer, shape: Parameters<typeof readUpload>[4], limits = LIMITS) =>
  readUpload(Readable.from([body]), { 'content-type': CONTENT_TYPE }, limits, new AbortController().signal, shape);

describe('readUpload: what each refusal says', () => {
  it('each limit\'s detail names the bound and the part', async () => {
    expect((await errorOf(read(form([file(Buffer.alloc(1001, 1))]))))?.message).toBe('The file is larger than 1000 bytes.');
    expect((await errorOf(read(form([{ name: 'long', value: 'y'.repeat(21) }, file()]))))?.message).toBe('The field "long" is longer than 20 bytes.');
    expect((await errorOf(read(form([file()]), LIMITS, { 'content-length': String(maxBodyBytes(LIMITS) + 1) })))?.message).toBe('The upload is larger than 1000 bytes.');
    const preamble = Buffer.concat([Buffer.alloc(maxBodyBytes(LIMITS) + 1, 0x61), Buffer.from('\r\n'), form([file()])]);
    expect((await errorOf(read(preamble)))?.message).toBe('The upload is larger than 1000 bytes.');
    expect((await errorOf(read(form([{ name: 'other', value: Buffer.from('x'), filename: 'x.png' }]))))?.message).toBe('Got a file in "other"; send it in the part named "file".');
    expect((await errorOf(read(form([{ name: 'file', value: 'text' }]))))?.message).toBe('The part named "file" is a text field, not a file: send it with a filename.');
    expect((await errorOf(read(form([file(Buffer.alloc(0))]))))?.message).toBe('The part named "file" is empty.');
    // One file: the catalogue's words ("Send exactly one file ...").
    expect((await errorOf(read(form([file(), file()]))))?.message).toBe('Send exactly one file, in the part named "file".');
    const hints = { extraFiles: { hints: 50 } };
    const hint = (bytes: Buffer): Part => ({ name: 'hints', value: bytes, filename: 'h.png' });
    expect((await errorOf(readShape(form([file(), hint(Buffer.alloc(51))]), hints)))?.message).toBe('The part "hints" is larger than 50 bytes.');
    // (Before the file: with it, busboy's count of file parts is reached first, and says so in the catalogue's words.)
    expect((await errorOf(readShape(form([hint(Buffer.alloc(5)), hint(Buffer.alloc(5)), file()]), hints)))?.message).toBe('Send at most one part named "hints".');
  });

  it('a field named __proto__ is kept as a field, not taken as the record\'s prototype', async () => {
    const upload = await read(form([{ name: '__proto__', value: 'p' }, file()]));
    expect(Object.keys(upload.fields)).toEqual(['__proto__']);
    expect(upload.fields['__proto__']).toBe('p');
  });

  it('the content type is matched without regard to case and must have parameters', async () => {
    const body = form([file(Buffer.from('abc'))]);
    const withType = (type: string) => readUpload(Readable.from([body]), { 'content-type': type }, LIMITS, new AbortController().signal);
    expect((await withType(`Multipart/Form-Data; boundary=${BOUNDARY}`)).file.toString()).toBe('abc');
    expect((await withType(`multipart/form-data ; boundary=${BOUNDARY}`)).file.toString()).toBe('abc');
    expect(await codeOf(withType('multipart/form-data'))).toBe('not_multipart');
    expect(await codeOf(withType(`x-multipart/form-data; boundary=${BOUNDARY}`))).toBe('not_multipart');
    expect(await codeOf(withType(`multipart/mixed; boundary=${BOUNDARY}`))).toBe('not_multipart');
  });

  it('a Content-Length that is not a number is ignored: the body is counted as it comes', async () => {
    expect((await read(form([file(Buffer.from('abc'))]), LIMITS, { 'content-length': 'lots' })).file.toString()).toBe('abc');
  });

  it('a body someone else read first is 500 body_already_read with the help, at once', async () => {
    const body = Readable.from([form([file()])]);
    for await (const chunk of body) void chunk;
    const error = await errorOf(readUpload(body, { 'content-type': CONTENT_TYPE }, LIMITS, new AbortController().signal));
    expect(error?.code).toBe('body_already_read');
    expect(error?.message).toContain('was read before bgcut got it');
  });

  it('file names are read as UTF-8', async () => {
    const name = 'fötö-写真.png';
    const body = Buffer.concat([
      Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="`),
      Buffer.from(name, 'utf8'),
      Buffer.from(`"\r\nContent-Type: image/png\r\n\r\nabc\r\n--${BOUNDARY}--\r\n`),
    ]);
    expect((await read(body)).filename).toBe(name);
  });

  it('an abort while the body is read rejects with the signal\'s ApiError and stops reading', async () => {
    const body = new PassThrough();
    const controller = new AbortController();
    const pending = readUpload(body, { 'content-type': CONTENT_TYPE }, LIMITS, controller.signal);
    body.write(Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.png"\r\n\r\nab`));
    controller.abort(new ApiError('upload_timeout'));
    expect(await codeOf(pending)).toBe('upload_timeout');
    expect(body.listenerCount('data')).toBe(0);
  });
});

describe('readUpload: other form shapes', () => {
  it('another name for the file part (remove.bg\'s image_file): "file" is then an unexpected part', async () => {
    const shape = { fileField: 'image_file' };
    const upload = await readShape(form([{ name: 'image_file', value: Buffer.from('abc'), filename: 'p.png' }]), shape);
    expect(upload.file.toString()).toBe('abc');
    const error = await errorOf(readShape(form([file()]), shape));
    expect(error?.code).toBe('unexpected_file_field');
    expect(error?.message).toBe('Got a file in "file"; send it in the part named "image_file".');
    expect((await errorOf(readShape(form([{ name: 'image_file', value: 'text' }]), shape)))?.message).toBe('The part named "image_file" is a text field, not a file: send it with a filename.');
  });

  it('one large field may be up to its own size, others keep maxFieldBytes; the body bound grows by it', async () => {
    const shape = { largeField: { name: 'image_file_b64', maxBytes: 200 } };
    const b64 = 'Q'.repeat(200);
    const upload = await readShape(form([{ name: 'image_file_b64', value: b64 }]), { ...shape, fileAlternatives: ['image_file_b64'] });
    // Streamed as bytes, not built into a string (multipart-streamed-field.ts): the field says so.
    expect(upload.fields.image_file_b64).toBe(STREAMED_FIELD);
    expect(upload.largeFieldBytes?.toString('utf8')).toBe(b64);
    expect(await codeOf(readShape(form([{ name: 'image_file_b64', value: `${b64}Q` }]), { ...shape, fileAlternatives: ['image_file_b64'] }))).toBe('field_too_large');
    expect(await codeOf(readShape(form([{ name: 'other', value: 'y'.repeat(21) }, file()]), shape))).toBe('field_too_large');
    // The declared length may be the usual bound plus the large field's size, not one byte more.
    const headers = (length: number) => ({ 'content-type': CONTENT_TYPE, 'content-length': String(length) });
    const bound = maxBodyBytes(LIMITS) + 200;
    expect((await readUpload(Readable.from([form([file()])]), headers(bound), LIMITS, new AbortController().signal, shape)).file.length).toBe(10);
    expect(await codeOf(readUpload(Readable.from([form([file()])]), headers(bound + 1), LIMITS, new AbortController().signal, shape))).toBe('upload_too_large');
  });

  it('optional parts raise the body bound by their size and 64 KiB each', async () => {
    const shape = { extraFiles: { hints: 500, mask: 300 } };
    const bound = maxBodyBytes(LIMITS) + 500 + 300 + 2 * 64 * 1024;
    const headers = (length: number) => ({ 'content-type': CONTENT_TYPE, 'content-length': String(length) });
    expect((await readUpload(Readable.from([form([file()])]), headers(bound), LIMITS, new AbortController().signal, shape)).file.length).toBe(10);
    expect(await codeOf(readUpload(Readable.from([form([file()])]), headers(bound + 1), LIMITS, new AbortController().signal, shape))).toBe('upload_too_large');
  });

  it('text standing in for the file: only a named alternative; with none of them it is missing_file', async () => {
    const shape = { fileAlternatives: ['image_url', 'image_file_b64'] };
    expect((await readShape(form([{ name: 'image_file_b64', value: 'QUJD' }]), shape)).fields).toEqual({ image_file_b64: 'QUJD' });
    expect(await codeOf(readShape(form([{ name: 'size', value: 'auto' }]), shape))).toBe('missing_file');
    expect(await codeOf(readShape(form([{ name: 'size', value: 'auto' }]), {}))).toBe('missing_file');
    // A file beside the alternative is read as the file.
    expect((await readShape(form([{ name: 'image_url', value: 'u' }, file(Buffer.from('abc'))]), shape)).file.toString()).toBe('abc');
  });
});

describe('readBatchUpload', () => {
  const BATCH: BatchLimits = { ...LIMITS, maxFiles: 3, maxTotalBytes: 1500 };
  const batch = (parts: Part[], limits = BATCH, headers: Record<string, string> = {}) =>
    readBatchUpload(Readable.from([form(parts)]), { 'content-type': CONTENT_TYPE, ...headers }, limits, new AbortController().signal);

  it('maxBatchBodyBytes is all the files, the fields and 64 KiB for each file and one more', () => {
    expect(maxBatchBodyBytes(BATCH)).toBe(1500 + 3 * 20 + 4 * 64 * 1024);
  });

  it('reads up to maxFiles files in order, with the fields', async () => {
    const read3 = await batch([file(Buffer.from('one'), '1.png'), { name: 'format', value: 'png' }, file(Buffer.from('two'), '2.png'), file(Buffer.from('three'), '3.png')]);
    expect(read3.files.map((f) => [f.filename, f.file.toString()])).toEqual([['1.png', 'one'], ['2.png', 'two'], ['3.png', 'three']]);
    expect(read3.fields).toEqual({ format: 'png' });
  });

  it('one more file than maxFiles is too_many_files, saying how many', async () => {
    const error = await errorOf(batch([file(), file(), file(), file()]));
    expect(error?.code).toBe('too_many_files');
    expect(error?.message).toBe('Send at most 3 files, each in a part named "file".');
  });

  it('each file keeps maxFileBytes; all together maxTotalBytes', async () => {
    const oneTooBig = await errorOf(batch([file(Buffer.alloc(1001))]));
    expect([oneTooBig?.code, oneTooBig?.message]).toEqual(['upload_too_large', 'The file is larger than 1000 bytes.']);
    expect((await batch([file(Buffer.alloc(1000)), file(Buffer.alloc(500))])).files.map((f) => f.file.length)).toEqual([1000, 500]);
    const together = await errorOf(batch([file(Buffer.alloc(1000)), file(Buffer.alloc(501))]));
    expect([together?.code, together?.message]).toEqual(['upload_too_large', 'The files are larger than 1500 bytes together.']);
  });

  it('a declared length over the batch bound is refused unread; at the bound it is read', async () => {
    const bound = maxBatchBodyBytes(BATCH);
    expect((await batch([file()], BATCH, { 'content-length': String(bound) })).files).toHaveLength(1);
    const error = await errorOf(batch([file()], BATCH, { 'content-length': String(bound + 1) }));
    expect([error?.code, error?.message]).toEqual(['upload_too_large', 'The upload is larger than 1500 bytes.']);
  });

  it('an empty file among several is missing_file naming which one', async () => {
    const error = await errorOf(batch([file(Buffer.from('a')), file(Buffer.alloc(0))]));
    expect([error?.code, error?.message]).toEqual(['missing_file', 'File part 2 named "file" is empty.']);
  });
});

describe('readUpload: bounds met exactly, and nothing left behind', () => {
  const hint = (bytes: Buffer): Part => ({ name: 'hints', value: bytes, filename: 'h.png' });

  it('text standing in for the file leaves the file, its name and its type empty', async () => {
    const byUrl = await read(form([{ name: 'image_url', value: 'http://x/' }]), LIMITS, {}, 'image_url');
    expect([byUrl.file.length, byUrl.filename, byUrl.declaredType]).toEqual([0, '', '']);
  });

  it('an optional part may be larger than the image\'s limit, up to its own', async () => {
    const upload = await readShape(form([file(), hint(Buffer.alloc(2000, 3))]), { extraFiles: { hints: 5000 } });
    expect(upload.parts?.hints?.file.length).toBe(2000);
  });

  it('maxFields fields beside the file and every optional part pass (busboy\'s part count includes them)', async () => {
    const upload = await readShape(form([...fields(3), file(), hint(Buffer.alloc(5)), { name: 'mask', value: Buffer.alloc(5), filename: 'm.png' }]), { extraFiles: { hints: 50, mask: 50 } });
    expect(Object.keys(upload.fields)).toHaveLength(3);
    expect(Object.keys(upload.parts ?? {}).sort()).toEqual(['hints', 'mask']);
  });

  it('a second image beside an optional part is too_many_files in the catalogue\'s words', async () => {
    const error = await errorOf(readShape(form([file(), hint(Buffer.alloc(5)), file()]), { extraFiles: { hints: 50 } }));
    expect([error?.code, error?.message]).toEqual(['too_many_files', 'Send exactly one file, in the part named "file".']);
  });

  it('a multipart type without a boundary says so in the detail', async () => {
    const error = await errorOf(readUpload(Readable.from([Buffer.from('x')]), { 'content-type': 'multipart/form-data; charset=utf-8' }, LIMITS, new AbortController().signal));
    expect([error?.code, error?.message]).toEqual(['malformed_multipart', 'Multipart: Boundary not found']);
  });

  it('an undeclared body of exactly the bound is read; one byte more is refused', async () => {
    const whole = form([file()]);
    const padded = (total: number) => Buffer.concat([Buffer.alloc(total - whole.length - 2, 0x61), Buffer.from('\r\n'), whole]);
    expect((await read(padded(maxBodyBytes(LIMITS)))).file.length).toBe(10);
    expect(await codeOf(read(padded(maxBodyBytes(LIMITS) + 1)))).toBe('upload_too_large');
  });

  it('leaves no listener on the request\'s signal, after a read or a refusal', async () => {
    const signal = new AbortController().signal;
    await readUpload(Readable.from([form([file()])]), { 'content-type': CONTENT_TYPE }, LIMITS, signal);
    await readUpload(Readable.from([form([file(), file()])]), { 'content-type': CONTENT_TYPE }, LIMITS, signal).catch(() => {});
    expect(getEventListeners(signal, 'abort')).toHaveLength(0);
  });
});

describe('readUpload: details where busboy\'s own limit is not the one that stops it', () => {
  it('the image over its limit beside a larger optional allowance: the file\'s own bound in the detail', async () => {
    const error = await errorOf(readShape(form([file(Buffer.alloc(1001, 1))]), { extraFiles: { hints: 5000 } }));
    expect([error?.code, error?.message]).toEqual(['upload_too_large', 'The file is larger than 1000 bytes.']);
  });

  it('a too-long field with a long name: the name cut to 100 characters in the detail', async () => {
    const name = `${'n'.repeat(100)}tail`;
    const error = await errorOf(read(form([{ name, value: 'y'.repeat(21) }, file()])));
    expect([error?.code, error?.message]).toEqual(['field_too_large', `The field "${'n'.repeat(100)}" is longer than 20 bytes.`]);
  });
});

describe('readUpload: a body cut short', () => {
  it('a form that ends inside a part is 400 malformed_multipart with busboy\'s reason', async () => {
    const whole = form([{ name: 'f0', value: 'x' }, file(Buffer.alloc(100, 1))]);
    const error = await errorOf(read(whole.subarray(0, whole.length - 60)));
    expect([error?.code, error?.message]).toEqual(['malformed_multipart', 'Unexpected end of form']);
    expect((error?.cause as Error | undefined)?.message).toBe('Unexpected end of form');
  });
});

describe('readUpload: a file part without a file name', () => {
  it('an application/octet-stream part with no filename is read as the file, its name empty', async () => {
    const body = Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"\r\nContent-Type: application/octet-stream\r\n\r\nabc\r\n--${BOUNDARY}--\r\n`);
    const upload = await read(body);
    expect([upload.file.toString(), upload.filename, upload.declaredType]).toEqual(['abc', '', 'application/octet-stream']);
  });
});
