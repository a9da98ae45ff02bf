import { parse as parseContentDisposition } from 'content-disposition';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createRemoveBgHandler, type RemoveBgHandler } from '../src/core/index.js';
import { uploadRequest } from './helpers/core-request.js';
import { createTestKeys, TEST_PLANS } from './helpers/fixtures.js';
import { objectOnTexture } from './helpers/synthetic-image.js';

describe('file names of uploads', () => {
  let handler: RemoveBgHandler;
  let key: string;
  let image: Buffer;
  beforeAll(async () => {
    const keys = await createTestKeys();
    key = keys.good;
    handler = createRemoveBgHandler({ keyStore: keys.store, plans: TEST_PLANS, inference: { address: inject('inferenceAddress') }, onInternalError: () => {} });
    await handler.ready();
    image = (await objectOnTexture(160, 120)).bytes;
  });
  afterAll(() => handler?.close());

  const filenameOf = (header: string | undefined) => parseContentDisposition(header ?? '').parameters.filename;

  it('a UTF-8 name comes back as sent', async () => {
    const response = await handler.handle(uploadRequest(key, image, 'café déjà vu.jpg').request);
    expect(response.status).toBe(200);
    expect(filenameOf(response.headers['content-disposition'])).toBe('café déjà vu-nobg.png');
  });

  it('a long name is cut between characters, never inside one (name sent as filename*)', async () => {
    // 99 letters then U+20000, a CJK letter outside the BMP (two UTF-16 units): a cut at 100
    // units would split it.
    const name = `${'a'.repeat(99)}\u{20000}${'b'.repeat(20)}.jpg`;
    const response = await handler.handle(uploadRequest(key, image, name, true).request);
    expect(response.status, response.body.toString().slice(0, 200)).toBe(200);
    const filename = filenameOf(response.headers['content-disposition'])!;
    expect(filename.startsWith(`${'a'.repeat(99)}\u{20000}`)).toBe(true);
    expect(filename.endsWith('-nobg.png')).toBe(true);
    expect(/[\uD800-\uDFFF]/u.test(filename), "a lone surrogate").toBe(false);
  });
});
