import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { RemoveBgHandler } from '../src/core/index.js';
import {
  createFuzzKeys,
  fuzzHandler,
  headerCases,
  imageCases,
  metricValue,
  multipartCases,
  newStats,
  optionCases,
  runCase,
  seedImages,
  type FuzzCase,
  type FuzzKeys,
} from './helpers/fuzz.js';

// The short version of `npm run stress`'s fuzzing: a few thousand cases on one fixed seed, so
// `npm test` checks the same cases every run (a new seed each run made a pass depend on the
// clock). New seeds are explored by `npm run stress` (a seed per run, printed) or FUZZ_SEED=N.
const seed = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : 20_261_126;

describe('fuzzing the request path (every answer a defined status with a problem+json body)', () => {
  let keys: FuzzKeys;
  let images: Buffer[];
  let handler: RemoveBgHandler;
  const stats = newStats();

  beforeAll(async () => {
    keys = await createFuzzKeys();
    images = await seedImages();
    handler = fuzzHandler(keys, inject('inferenceAddress'), stats);
    await handler.ready();
  });

  afterAll(async () => {
    console.log(`fuzz (seed ${seed}): ${stats.cases} cases, ${stats.inferred} reached the model; ${JSON.stringify(stats.byStatus)}`);
    await handler?.close();
  });

  const property = (arb: () => fc.Arbitrary<FuzzCase>, numRuns: number, hangMs = 10_000) =>
    fc.assert(
      fc.asyncProperty(arb(), (c) => runCase(handler, c, stats, hangMs)),
      { numRuns, seed, endOnFailure: true },
    );

  it('multipart bodies: boundaries, part headers, sizes, truncations, chunkings', async () => {
    await property(() => multipartCases(keys, images), 1500);
  });

  it('header sets: key variants and placements, duplicates, huge values, methods', async () => {
    await property(() => headerCases(keys, images), 1000);
  });

  it('options in the query string and the form, against plans that limit them', async () => {
    await property(() => optionCases(keys, images), 800);
  });

  it('mutated images of every input format, refused after the header probe or by it', async () => {
    await property(() => imageCases(keys, images, false), 600);
  });

  // Each case that decodes costs a real inference: few of them, and time for a busy machine.
  it('mutated images that go on to decoding and the real model', async () => {
    await property(() => imageCases(keys, images, true), 10, 60_000);
  }, 300_000);

  it('leaves nothing behind: no internal error reported, nothing in flight', async () => {
    expect(stats.cases).toBeGreaterThanOrEqual(3900);
    expect(stats.internalErrors.map(String)).toEqual([]);
    const text = (await handler.metrics({ method: 'GET', url: '/metrics', headers: {}, body: undefined as never, signal: new AbortController().signal })).body.toString();
    expect(metricValue(text, 'bgcut_requests_in_flight')).toBe(0);
  });
});
