import { randomBytes } from 'node:crypto';
import { PassThrough } from 'node:stream';
import { MessageChannel } from 'node:worker_threads';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { readUpload } from '../src/core/multipart.js';
import { isGatheredUpload, UploadBytes } from '../src/core/upload-bytes.js';
import { multipartBody } from './helpers/fixtures.js';

const LIMITS = { maxFileBytes: 8 << 20, maxFields: 4, maxFieldBytes: 64 };
const file = randomBytes(3 << 20);
const form = multipartBody([
  { name: 'format', data: 'png' },
  { name: 'file', filename: 'photo.jpg', type: 'image/jpeg', data: file },
]);

/** The form as a socket would deliver it: 64 KiB chunks, each on its own turn. */
function chunked(body: Buffer): PassThrough {
  const stream = new PassThrough();
  (async () => {
    for (let at = 0; at < body.length; at += 64 * 1024) {
      stream.write(body.subarray(at, at + 64 * 1024));
      await new Promise((r) => setImmediate(r));
    }
    stream.end();
  })();
  return stream;
}

/** The sizes of every Buffer.concat result while `work` runs. */
async function concatSizes(work: () => Promise<unknown>): Promise<number[]> {
  const concat = Buffer.concat;
  const sizes: number[] = [];
  vi.spyOn(Buffer, 'concat').mockImplementation((list, total) => {
    const joined = concat(list, total);
    sizes.push(joined.length);
    return joined;
  });
  await work();
  return sizes;
}

afterEach(() => vi.restoreAllMocks());

describe('upload bytes: a one-file form is gathered as it arrives', () => {
  it('with a declared length, the file comes back byte for byte and is never joined from its chunks at the end', async () => {
    let upload: Awaited<ReturnType<typeof readUpload>> | undefined;
    const sizes = await concatSizes(async () => {
      upload = await readUpload(chunked(form.body), { 'content-type': form.contentType, 'content-length': String(form.body.length) }, LIMITS, new AbortController().signal);
    });
    expect(upload!.file.equals(file)).toBe(true);
    expect(upload!.fields).toEqual({ format: 'png' });
    // No join as large as the file (busboy may join a few header bytes).
    expect(sizes.filter((n) => n >= file.length)).toEqual([]);
  });

  it('with a declared length, the file is memory of its own that moves whole: handed to a worker thread, it is moved, not copied', async () => {
    const upload = await readUpload(chunked(form.body), { 'content-type': form.contentType, 'content-length': String(form.body.length) }, LIMITS, new AbortController().signal);
    // Not shared memory, which lives until every thread that saw it collected its handle.
    expect(upload.file.buffer).toBeInstanceOf(ArrayBuffer);
    expect(isGatheredUpload(upload.file)).toBe(true);
    const { port1, port2 } = new MessageChannel();
    const received = new Promise<Uint8Array>((resolve) => port2.once('message', resolve));
    port1.postMessage(upload.file, [upload.file.buffer as ArrayBuffer]);
    const there = await received;
    port1.close();
    // Moved: nothing of it is left here, and the other side has every byte.
    expect(upload.file.length).toBe(0);
    expect(Buffer.from(there.buffer, there.byteOffset, there.byteLength).equals(file)).toBe(true);
  });

  it('without a declared length (chunked transfer), the chunks are joined: the same bytes', async () => {
    const sizes = await concatSizes(async () => {
      const upload = await readUpload(chunked(form.body), { 'content-type': form.contentType }, LIMITS, new AbortController().signal);
      expect(upload.file.equals(file)).toBe(true);
    });
    expect(sizes).toContain(file.length);
  });

  it('a body longer than its declared length (an adapter whose headers do not match) still gives every byte', async () => {
    const upload = await readUpload(chunked(form.body), { 'content-type': form.contentType, 'content-length': String(1 << 20) }, LIMITS, new AbortController().signal);
    expect(upload.file.equals(file)).toBe(true);
  });

  it('UploadBytes: chunks past the capacity keep what was copied before them, in order', () => {
    const bytes = new UploadBytes(5);
    for (const part of ['abc', 'de', 'fgh', 'i']) bytes.push(Buffer.from(part));
    expect(bytes.length).toBe(9);
    expect(bytes.bytes().toString()).toBe('abcdefghi');
    const exact = new UploadBytes(5);
    exact.push(Buffer.from('abcde'));
    expect(exact.bytes().toString()).toBe('abcde');
  });
});
