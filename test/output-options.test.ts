import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ApiError } from '../src/core/errors.js';
import { readUpload } from '../src/core/multipart.js';
import { parseOutputOptions } from '../src/core/output-options.js';
import { multipartBody } from './helpers/fixtures.js';

/** CPU time of `work` run `times` times, in microseconds. */
function cpuMicros(work: () => void, times: number): number {
  const before = process.cpuUsage();
  for (let i = 0; i < times; i++) work();
  const used = process.cpuUsage(before);
  return used.user + used.system;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** parseOutputOptions on a crop margin of `spaces` blanks followed by a character no margin has: always refused. */
const badMargin = (spaces: number) => () => {
  expect(() => parseOutputOptions({ crop: 'true', crop_margin: `1${' '.repeat(spaces)}x` }, '/v1/remove-bg', {})).toThrow(ApiError);
};

describe('output options: hostile input', () => {
  it('a crop margin with a long run of spaces is refused in time linear in its length (x4 the input, well under x16 the time)', () => {
    const n = 2_000;
    // Enough repetitions that one batch at n takes >= 20 ms of CPU, whatever the speed of the parser.
    let times = 1;
    while (cpuMicros(badMargin(n), times) < 20_000) times *= 2;
    const ratios: number[] = [];
    for (let round = 0; round < 5; round++) {
      const small = cpuMicros(badMargin(n), times);
      const large = cpuMicros(badMargin(4 * n), times);
      ratios.push(large / small);
    }
    // Linear: about 4; the quadratic pattern gave about 16. The margin holds on a busy machine.
    expect(median(ratios)).toBeLessThan(8);
  });

  it('a form field named __proto__ is refused with 400 invalid_option, not dropped', async () => {
    const form = multipartBody([
      { name: '__proto__', data: 'png' },
      { name: 'file', filename: 'a.png', type: 'image/png', data: Buffer.from('not read here') },
    ]);
    const body = new PassThrough();
    body.end(form.body);
    const upload = await readUpload(body, { 'content-type': form.contentType }, { maxFileBytes: 1024, maxFields: 4, maxFieldBytes: 64 }, new AbortController().signal);
    expect(Object.keys(upload.fields)).toEqual(['__proto__']);
    let refusal: unknown;
    try {
      parseOutputOptions(upload.fields, '/v1/remove-bg', {});
    } catch (error) {
      refusal = error;
    }
    expect(refusal).toBeInstanceOf(ApiError);
    expect((refusal as ApiError).code).toBe('invalid_option');
    expect((refusal as ApiError).status).toBe(400);
    expect((refusal as ApiError).message).toMatch(/^__proto__: unknown option/);
  });

  it('an option named __proto__ in the query string is refused with 400 invalid_option', () => {
    expect(() => parseOutputOptions({}, '/v1/remove-bg?__proto__=png', {})).toThrow(/__proto__: unknown option/);
  });
});
