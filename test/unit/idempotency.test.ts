import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ApiError } from '../../src/core/errors.js';
import type { CoreRequest, CoreResponse } from '../../src/core/http-types.js';
import { MemoryIdempotencyStore, type IdempotencyStore } from '../../src/core/idempotency/store.js';
import type { Admitted } from '../../src/core/pipeline/admission.js';
import { idempotentRequest, type IdempotencyDeps } from '../../src/core/pipeline/idempotency.js';
import type { Order } from '../../src/core/pipeline/order.js';
import { openRequestScope, type RequestScope } from '../../src/core/pipeline/request-scope.js';
import { captureInternalError } from '../helpers/log-capture.js';
import { signal, within } from '../helpers/within.js';

// The Idempotency-Key step alone, over the memory store: no server, no model. The handler-level
// behaviour (charged once, replays through HTTP, Redis across instances) is in
// test/idempotency-key.test.ts.

const TIMES = { keyTtlMs: 60_000, resultTtlMs: 60_000, inProgressTtlMs: 60_000 };

function scopeFor(key: string | string[] | undefined, url = '/v1/remove-bg?format=png'): RequestScope {
  const request: CoreRequest = {
    method: 'POST',
    url,
    headers: key === undefined ? {} : { 'idempotency-key': key as string },
    body: new PassThrough(),
    signal: new AbortController().signal,
  };
  const scope = openRequestScope(request, 60_000);
  scope.uploadDone();
  return scope;
}
const admittedAs = (accountId = 'acct_a') => ({ identity: { account: { id: accountId, plan: 'p', status: 'active' }, keyId: 'k' }, plan: { requestsPerMinute: 1 } }) as unknown as Admitted;
const orderOf = (upload: Partial<Order['upload']> = {}) =>
  ({ upload: { file: Buffer.from('image bytes'), filename: 'photo.jpg', declaredType: 'image/jpeg', fields: { format: 'png' }, ...upload } }) as Order;
const depsWith = (store: IdempotencyStore = new MemoryIdempotencyStore(), extra: Partial<IdempotencyDeps> = {}): IdempotencyDeps => ({
  store,
  times: TIMES,
  maxResultBytes: 1000,
  onInternalError: captureInternalError,
  ...extra,
});
const answer = (body = 'cutout'): CoreResponse => ({
  status: 200,
  headers: { 'content-type': 'image/png', 'x-ratelimit-remaining': '9', 'x-ratelimit-reset': '30', ratelimit: 'limit=10', 'ratelimit-policy': 'q=10', 'retry-after': '3', 'x-confidence': '0.90', 'x-not-ratelimit': 'kept' },
  body: Buffer.from(body),
});
const codeOf = (promise: Promise<unknown>) =>
  promise.then(
    (value) => (value === undefined ? 'runs' : 'replayed'),
    (error: unknown) => (error instanceof ApiError ? error.code : `not an ApiError: ${String(error)}`),
  );

/** One request through the step: claims, and if it is the one to run, completes with `response` (or fails, ending its scope). */
async function run(deps: IdempotencyDeps, options: { key?: string; url?: string; order?: Order; account?: string; response?: CoreResponse | 'fail' } = {}) {
  const scope = scopeFor(options.key ?? 'k-1', options.url);
  const step = idempotentRequest(scope, admittedAs(options.account), deps)!;
  const replay = await step.claim(options.order ?? orderOf());
  if (!replay && options.response !== 'fail') await step.complete(options.response ?? answer());
  await scope.end(() => {});
  return replay;
}

describe('Idempotency-Key: the header', () => {
  it('no header: no idempotency step', () => {
    expect(idempotentRequest(scopeFor(undefined), admittedAs(), depsWith())).toBeUndefined();
  });

  it.each([
    ['empty', ''],
    ['256 characters', 'k'.repeat(256)],
    ['a space', 'two words'],
    ['a control character', 'tab\there'],
    ['DEL', 'del\x7f'],
    ['non-ASCII', 'clé'],
  ])('400 invalid_idempotency_key for %s', (_, value) => {
    expect(() => idempotentRequest(scopeFor(value), admittedAs(), depsWith())).toThrow(
      expect.objectContaining({ code: 'invalid_idempotency_key', status: 400, message: 'Idempotency-Key must be one header of 1 to 255 visible ASCII characters (a UUID is a good key).' }),
    );
  });

  it('400 for the header sent twice (an array)', () => {
    expect(() => idempotentRequest(scopeFor(['a', 'b']), admittedAs(), depsWith())).toThrow(expect.objectContaining({ code: 'invalid_idempotency_key' }));
  });

  it('255 visible ASCII characters, from ! to ~, are a key', () => {
    expect(idempotentRequest(scopeFor(`!${'k'.repeat(253)}~`), admittedAs(), depsWith())).toBeDefined();
    expect(idempotentRequest(scopeFor('!'), admittedAs(), depsWith())).toBeDefined();
  });
});

describe('Idempotency-Key: claims, replays and the fingerprint', () => {
  it('a retry is answered with the first result: its body and headers, the standing headers of now, Idempotent-Replayed', async () => {
    const deps = depsWith();
    expect(await run(deps)).toBeUndefined();
    const scope = scopeFor('k-1');
    scope.rateHeaders = { 'x-ratelimit-remaining': '4' };
    const replay = await idempotentRequest(scope, admittedAs(), deps)!.claim(orderOf());
    expect(replay).toEqual({
      status: 200,
      headers: { 'content-type': 'image/png', 'x-confidence': '0.90', 'x-not-ratelimit': 'kept', 'x-ratelimit-remaining': '4', 'idempotent-replayed': 'true' },
      body: Buffer.from('cutout'),
    });
  });

  it.each([
    ['another path', { url: '/v2/remove-bg?format=png' }],
    ['another query', { url: '/v1/remove-bg?format=jpg' }],
    ['another file name', { order: orderOf({ filename: 'other.jpg' }) }],
    ['another field value', { order: orderOf({ fields: { format: 'jpg' } }) }],
    ['another field name', { order: orderOf({ fields: { size: 'png' } }) }],
    ['one more field', { order: orderOf({ fields: { format: 'png', size: 'auto' } }) }],
    ['other image bytes', { order: orderOf({ file: Buffer.from('other bytes') }) }],
    ['a field name and value split elsewhere', { order: orderOf({ fields: { form: 'atpng' } }) }],
  ])('the same key with %s: 422 idempotency_key_reused, done or in progress', async (_, other) => {
    const deps = depsWith();
    await run(deps);
    const reused = await run(deps, other).catch((e: ApiError) => e);
    expect(reused).toMatchObject({ code: 'idempotency_key_reused', status: 422 });
    expect((reused as ApiError).message).toBe('This Idempotency-Key was used for a different request (another image, other options or another path) in the last 24 hours.');
    // In progress too: the fingerprint is compared before "in use".
    const gated = depsWith();
    const scope = scopeFor('k-2');
    await idempotentRequest(scope, admittedAs(), gated)!.claim(orderOf());
    expect(await codeOf(run(gated, { key: 'k-2', ...other }))).toBe('idempotency_key_reused');
  });

  it('the fingerprint counts each name and value apart (no two splits of one string match)', async () => {
    const deps = depsWith();
    await run(deps, { order: orderOf({ fields: { ab: 'c' } }) });
    expect(await codeOf(run(deps, { order: orderOf({ fields: { a: 'bc' } }) }))).toBe('idempotency_key_reused');
  });

  it('the same fields in another order are the same request', async () => {
    const deps = depsWith();
    await run(deps, { order: orderOf({ fields: { b: '2', a: '1', c: '3' } }) });
    expect(await codeOf(run(deps, { order: orderOf({ fields: { c: '3', a: '1', b: '2' } }) }))).toBe('replayed');
    expect(await codeOf(run(deps, { order: orderOf({ fields: { a: '1', c: '3', b: '2' } }) }))).toBe('replayed');
  });

  it('while the first runs: 409 idempotency_key_in_use with Retry-After 2', async () => {
    const deps = depsWith();
    const first = scopeFor('k-1');
    expect(await idempotentRequest(first, admittedAs(), deps)!.claim(orderOf())).toBeUndefined();
    const error = await run(deps).catch((e: ApiError) => e);
    expect(error).toMatchObject({ code: 'idempotency_key_in_use', status: 409, headers: { 'retry-after': '2' } });
  });

  it('keys are per account', async () => {
    const deps = depsWith();
    await run(deps, { account: 'acct_a' });
    expect(await codeOf(run(deps, { account: 'acct_b', order: orderOf({ file: Buffer.from('other') }) }))).toBe('runs');
  });

  it('a request that fails after its claim gives the key back: the retry runs', async () => {
    const deps = depsWith();
    expect(await codeOf(run(deps, { response: 'fail' }))).toBe('runs');
    expect(await codeOf(run(deps))).toBe('runs');
    // Completed: the claim is kept, even when its scope ends afterwards.
    expect(await codeOf(run(deps))).toBe('replayed');
  });

  it('a result of exactly maxResultBytes is kept; one byte more is not kept and its key is released: the retry runs afresh', async () => {
    const deps = depsWith(undefined, { maxResultBytes: 6 });
    await run(deps, { key: 'fits', response: answer('123456') });
    expect(await codeOf(run(deps, { key: 'fits' }))).toBe('replayed');
    await run(deps, { key: 'big', response: answer('1234567') });
    expect(await codeOf(run(deps, { key: 'big' }))).toBe('runs');
  });

  it('a store that cannot be reached: 503 service_unavailable with Retry-After 5; a failed result write goes to onInternalError', async () => {
    const failing = new MemoryIdempotencyStore();
    failing.claim = () => Promise.reject(new Error('store down'));
    const error = await run(depsWith(failing)).catch((e: ApiError) => e);
    expect(error).toMatchObject({ code: 'service_unavailable', status: 503, headers: { 'retry-after': '5' }, message: 'The idempotency store cannot be reached.' });
    const errors: unknown[] = [];
    const flaky = new MemoryIdempotencyStore();
    flaky.complete = () => Promise.reject(new Error('write lost'));
    await run(depsWith(flaky, { onInternalError: (e) => errors.push(e) }));
    expect(errors).toEqual([new Error('write lost')]);
  });

  it('a replayed request completes nothing: complete() after a replay does not touch the store', async () => {
    const deps = depsWith();
    await run(deps);
    const step = idempotentRequest(scopeFor('k-1'), admittedAs(), deps)!;
    expect(await step.claim(orderOf())).toBeDefined();
    let completes = 0;
    const complete = deps.store.complete.bind(deps.store);
    deps.store.complete = (...args) => {
      completes++;
      return complete(...args);
    };
    await step.complete(answer('other'));
    expect(completes).toBe(0);
  });

  it('a claim that lands after the client left is given back: the retry runs', async () => {
    const store = new MemoryIdempotencyStore();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const claim = store.claim.bind(store);
    store.claim = async (...args) => {
      await gate;
      return claim(...args);
    };
    // The event the retry needs: the late claim given back.
    const abandon = store.abandon.bind(store);
    const abandoned = signal();
    store.abandon = async (...args) => {
      await abandon(...args);
      abandoned.resolve();
    };
    const deps = depsWith(store);
    const request: CoreRequest = { method: 'POST', url: '/v1/remove-bg', headers: { 'idempotency-key': 'late' }, body: new PassThrough(), signal: new AbortController().signal };
    const controller = new AbortController();
    Object.assign(request, { signal: controller.signal });
    const scope = openRequestScope(request, 60_000);
    const pending = idempotentRequest(scope, admittedAs(), deps)!.claim(orderOf()).catch((e: ApiError) => e);
    controller.abort();
    expect(await pending).toMatchObject({ code: 'client_closed' });
    release();
    await within(abandoned.promise, 10_000, () => 'the late claim was not given back');
    store.claim = claim;
    expect(await codeOf(run(deps, { key: 'late' }))).toBe('runs');
    await scope.end(() => {});
  });
});

describe('Idempotency-Key: optional file parts and results no longer kept', () => {
  const hints = (bytes: string, name = 'hints') => ({ [name]: { file: Buffer.from(bytes), filename: 'h.png', declaredType: 'image/png' } });
  it('other bytes in an optional part, or the part under another name, is another request: 422; the same parts replay', async () => {
    const deps = depsWith();
    await run(deps, { order: orderOf({ parts: { ...hints('one'), ...hints('bg', 'bg_image') } }) });
    expect(await codeOf(run(deps, { order: orderOf({ parts: { ...hints('bg', 'bg_image'), ...hints('one') } }) }))).toBe('replayed');
    expect(await codeOf(run(deps, { order: orderOf({ parts: { ...hints('two'), ...hints('bg', 'bg_image') } }) }))).toBe('idempotency_key_reused');
    expect(await codeOf(run(deps, { order: orderOf({ parts: { ...hints('one', 'mask'), ...hints('bg', 'bg_image') } }) }))).toBe('idempotency_key_reused');
    expect(await codeOf(run(deps, { order: orderOf() }))).toBe('idempotency_key_reused');
  });

  it('a completed key whose result the store dropped answers 409 idempotency_result_gone (not a second run)', async () => {
    // Room for one result (each counts its body and 1 KiB): the second pushes the first out.
    const deps = depsWith(new MemoryIdempotencyStore({ maxBytes: 1500 }));
    await run(deps, { key: 'first', response: answer('a'.repeat(300)) });
    await run(deps, { key: 'second', response: answer('b'.repeat(300)) });
    const gone = await run(deps, { key: 'first' }).catch((e: ApiError) => e);
    expect(gone).toMatchObject({ code: 'idempotency_result_gone', status: 409 });
    expect(await codeOf(run(deps, { key: 'second' }))).toBe('replayed');
  });
});

describe('MemoryIdempotencyStore', () => {
  const result = { status: 200, headers: {}, body: Buffer.from('x') };
  it('only the claim\'s own token completes or gives it back; giving back an unknown key is a no-op', async () => {
    const store = new MemoryIdempotencyStore();
    expect(await store.claim('k', 'fp', 'mine', TIMES)).toEqual({ state: 'claimed', token: 'mine' });
    await store.complete('k', 'theirs', result, TIMES);
    await store.abandon('k', 'theirs');
    expect(await store.claim('k', 'fp', 'x', TIMES)).toEqual({ state: 'in-progress', fingerprint: 'fp' });
    await store.complete('k', 'mine', result, TIMES);
    expect(await store.claim('k', 'fp', 'x', TIMES)).toEqual({ state: 'done', fingerprint: 'fp', result });
    await store.abandon('nothing', 'x');
    await store.complete('nothing', 'x', result, TIMES);
    expect(await store.claim('nothing', 'fp', 'y', TIMES)).toEqual({ state: 'claimed', token: 'y' });
  });
  it('remembers at most maxKeys keys, forgetting the least recently used', async () => {
    const store = new MemoryIdempotencyStore({ maxKeys: 2 });
    await store.claim('a', 'fp', 't', TIMES);
    await store.claim('b', 'fp', 't', TIMES);
    // Touch a: b is now the least recently used, and the one a third key pushes out.
    expect((await store.claim('a', 'fp', 't2', TIMES)).state).toBe('in-progress');
    await store.claim('c', 'fp', 't', TIMES);
    expect((await store.claim('a', 'fp', 't3', TIMES)).state).toBe('in-progress');
    expect((await store.claim('b', 'fp', 't3', TIMES)).state).toBe('claimed');
  });

  it('keeps results up to maxBytes, each counted as its body and 1 KiB', async () => {
    const sized = (n: number) => ({ status: 200, headers: {}, body: Buffer.alloc(n) });
    const twoResults = async (second: number) => {
      // Room for two results of 100 bytes each: 2 × (100 + 1024).
      const store = new MemoryIdempotencyStore({ maxBytes: 2 * (1024 + 100) });
      for (const [key, n] of [['a', 100], ['b', second]] as const) {
        await store.claim(key, 'fp', key, TIMES);
        await store.complete(key, key, sized(n), TIMES);
      }
      return [await store.claim('a', 'fp', 'x', TIMES), await store.claim('b', 'fp', 'x', TIMES)];
    };
    // Exactly full: both kept.
    expect(await twoResults(100)).toEqual([
      { state: 'done', fingerprint: 'fp', result: sized(100) },
      { state: 'done', fingerprint: 'fp', result: sized(100) },
    ]);
    // One byte over: the least recently used result goes; its key stays done.
    expect(await twoResults(101)).toEqual([
      { state: 'done', fingerprint: 'fp', result: undefined },
      { state: 'done', fingerprint: 'fp', result: sized(101) },
    ]);
  });

  // lru-cache reads its own clock (performance.now), which fake timers do not move: these wait
  // past each time for real, and assert only what must hold once it has passed.
  const elapsed = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  it('a claim never completed lapses after inProgressTtlMs: the key can be claimed again', async () => {
    const store = new MemoryIdempotencyStore();
    const times = { keyTtlMs: 60_000, resultTtlMs: 60_000, inProgressTtlMs: 20 };
    await store.claim('k', 'fp', 'dead instance', times);
    await elapsed(60);
    expect(await store.claim('k', 'fp', 'retry', times)).toEqual({ state: 'claimed', token: 'retry' });
  });

  it('a completed key lapses after keyTtlMs, and its result after resultTtlMs', async () => {
    const store = new MemoryIdempotencyStore();
    const times = { keyTtlMs: 200, resultTtlMs: 20, inProgressTtlMs: 60_000 };
    const result = { status: 200, headers: {}, body: Buffer.from('x') };
    for (const key of ['result', 'key']) {
      await store.claim(key, 'fp', 't', times);
      await store.complete(key, 't', result, times);
    }
    await elapsed(60);
    // Past the result's time: the result is gone (the key is still done unless this box stalled past its time too).
    const afterResult = await store.claim('result', 'fp', 'u', times);
    expect(afterResult.state === 'claimed' || (afterResult.state === 'done' && afterResult.result === undefined)).toBe(true);
    await elapsed(240);
    expect(await store.claim('key', 'fp', 'v', times)).toEqual({ state: 'claimed', token: 'v' });
  });
});
