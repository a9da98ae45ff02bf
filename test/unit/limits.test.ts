import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ApiError } from '../../src/core/errors.js';
import { InFlight } from '../../src/core/limits/in-flight.js';
import { PlanEnforcer } from '../../src/core/limits/plan-enforcer.js';
import { checkImageSize, checkPlanOptions, checkPlanQuality, chooseModel, maxUploadBytes } from '../../src/core/limits/plan-policy.js';
import { DEFAULT_PLANS, jobLimitsOf, loadPlansFile, quotaCost, validatePlans, type Plans } from '../../src/core/limits/plans.js';
import { nextMonth } from '../../src/core/limits/quota-limiter.js';
import { Insurance } from '../../src/core/limits/insurance.js';
import { PlanRates, rateLimitHeaders } from '../../src/core/limits/rate-limiter.js';

// The limits alone, in memory: no server, no model. Expected values are worked out by hand
// from the plans' documented meaning (README "Plans"), not read from the code.

const PLANS: Plans = {
  images: { requestsPerMinute: 3, monthlyQuota: { unit: 'images', amount: 2 } },
  mp: { requestsPerMinute: 100, monthlyQuota: { unit: 'megapixels', amount: 10 } },
  open: { requestsPerMinute: 100 },
  one: { requestsPerMinute: 100, maxConcurrent: 1 },
  bursty: { requestsPerMinute: 2, burst: 1 },
};
const enforcer = () => new PlanEnforcer({ plans: PLANS, validate: false });
const failure = (promise: Promise<unknown>) =>
  promise.then(
    () => undefined,
    (error: unknown) => error as ApiError,
  );
const thrown = (fn: () => unknown) => {
  try {
    fn();
  } catch (error) {
    return error as ApiError;
  }
  return undefined;
};

afterEach(() => {
  vi.useRealTimers();
});

describe('request rate', () => {
  it('the minute allowance: remaining counts down, then 429 rate_limited with Retry-After = the seconds left in the window', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(new Date('2026-05-10T12:00:00.000Z'));
    const limits = enforcer();
    const first = await limits.admit('a', 'images');
    expect(first.headers).toMatchObject({ 'x-ratelimit-limit': '3', 'x-ratelimit-remaining': '2', 'x-ratelimit-reset': '60' });
    await limits.admit('a', 'images');
    vi.setSystemTime(new Date('2026-05-10T12:00:15.000Z'));
    const third = await limits.admit('a', 'images');
    expect(third.headers).toMatchObject({ 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '45' });
    vi.setSystemTime(new Date('2026-05-10T12:00:15.500Z'));
    const refused = await failure(limits.admit('a', 'images'));
    expect(refused).toMatchObject({ code: 'rate_limited', status: 429 });
    // 44.5 s left, rounded up.
    expect(refused!.headers).toMatchObject({ 'retry-after': '45', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '45', 'x-ratelimit-limit': '3' });
    // Another account is not affected.
    expect((await limits.admit('b', 'images')).headers['x-ratelimit-remaining']).toBe('2');
    // A new window: the allowance is back.
    vi.setSystemTime(new Date('2026-05-10T12:01:00.500Z'));
    expect((await limits.admit('a', 'images')).headers['x-ratelimit-remaining']).toBe('2');
  });

  it('Retry-After is at least 1 at the very end of a window', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(new Date('2026-05-10T12:00:00.000Z'));
    const limits = enforcer();
    for (let i = 0; i < 3; i++) await limits.admit('a', 'images');
    vi.setSystemTime(new Date('2026-05-10T12:00:59.999Z'));
    expect((await failure(limits.admit('a', 'images')))!.headers['retry-after']).toBe('1');
  });

  it('burst: past the minute allowance, `burst` more, then 429', async () => {
    const limits = enforcer();
    await limits.admit('a', 'bursty');
    await limits.admit('a', 'bursty');
    await limits.admit('a', 'bursty'); // the burst
    expect(await failure(limits.admit('a', 'bursty'))).toMatchObject({ code: 'rate_limited' });
  });

  it('rateLimitHeaders: the IETF fields and the X- ones', () => {
    expect(rateLimitHeaders({ limit: 10, remaining: 4, resetSeconds: 30 })).toEqual({
      'ratelimit-policy': '"minute";q=10;w=60',
      ratelimit: '"minute";r=4;t=30',
      'x-ratelimit-limit': '10',
      'x-ratelimit-remaining': '4',
      'x-ratelimit-reset': '30',
    });
  });

  it('an aborted request is refused with its reason and takes nothing', async () => {
    const limits = enforcer();
    const controller = new AbortController();
    controller.abort(new ApiError('client_closed'));
    expect(await failure(limits.admit('a', 'one', { signal: controller.signal }))).toMatchObject({ code: 'client_closed' });
    expect((await limits.standing('a', 'one')).inProgress).toBe(0);
  });
});

describe('requests in progress', () => {
  it('maxConcurrent: the second is 429 concurrency_limited with Retry-After 1 and the rate headers, costing no rate point; release frees the slot', async () => {
    const limits = enforcer();
    const first = await limits.admit('a', 'one');
    expect((await limits.standing('a', 'one')).inProgress).toBe(1);
    const refused = await failure(limits.admit('a', 'one'));
    expect(refused).toMatchObject({ code: 'concurrency_limited', status: 429 });
    expect(refused!.headers).toMatchObject({ 'retry-after': '1', 'x-ratelimit-limit': '100', 'x-ratelimit-remaining': '99' });
    expect(refused!.message).toContain('1 request(s)');
    await first.release();
    expect((await limits.standing('a', 'one')).inProgress).toBe(0);
    const again = await limits.admit('a', 'one');
    expect(again.headers['x-ratelimit-remaining']).toBe('98');
    await again.release();
  });

  it('a request refused for its rate gives its slot back', async () => {
    const plans: Plans = { tight: { requestsPerMinute: 1, maxConcurrent: 5 } };
    const limits = new PlanEnforcer({ plans, validate: false });
    const first = await limits.admit('a', 'tight');
    expect(await failure(limits.admit('a', 'tight'))).toMatchObject({ code: 'rate_limited' });
    expect((await limits.standing('a', 'tight')).inProgress).toBe(1);
    await first.release();
  });

  it('an unknown plan is a 500 internal_error naming it', () => {
    const error = thrown(() => enforcer().plan('gold'));
    expect(error).toMatchObject({ code: 'internal_error', status: 500 });
    expect(error!.message).toContain('"gold"');
    expect(thrown(() => enforcer().plan('toString'))).toMatchObject({ code: 'internal_error' });
  });
});

describe('monthly quota', () => {
  const march = new Date('2026-03-31T23:59:00.000Z');

  it('images: each cutout costs 1 whatever its size; used, remaining and the reset date in the standing', async () => {
    const limits = enforcer();
    await limits.reserveQuota('a', 'images', 24_000_000, march);
    const standing = await limits.standing('a', 'images', march);
    expect(standing.quota).toEqual({ unit: 'images', amount: 2, used: 1, remaining: 1, resetsAt: '2026-04-01T00:00:00.000Z' });
    await limits.reserveQuota('a', 'images', 100, march);
    expect((await limits.standing('a', 'images', march)).quota).toMatchObject({ used: 2, remaining: 0 });
  });

  it('megapixels: each cutout costs its size rounded up to whole MP, at least 1', async () => {
    const limits = enforcer();
    const cases: [number, number][] = [
      [300_000, 1],
      [1_000_000, 1],
      [1_000_001, 2],
      [2_500_000, 3],
    ];
    let used = 0;
    for (const [pixels, cost] of cases) {
      await limits.reserveQuota('a', 'mp', pixels, march);
      used += cost;
      expect((await limits.standing('a', 'mp', march)).quota, `${pixels} px`).toMatchObject({ used, remaining: 10 - used });
    }
    expect(used).toBe(7);
    // 4 MP does not fit in the 3 left: refused, nothing charged.
    expect(await failure(limits.reserveQuota('a', 'mp', 4_000_000, march))).toMatchObject({ code: 'quota_exceeded' });
    expect((await limits.standing('a', 'mp', march)).quota).toMatchObject({ used: 7, remaining: 3 });
  });

  it('quota_exceeded: 429 with Retry-After = the seconds to the first of next month (UTC), and the plan named in the detail', async () => {
    const limits = enforcer();
    await limits.reserveQuota('a', 'images', 1, march);
    await limits.reserveQuota('a', 'images', 1, march);
    const refused = await failure(limits.reserveQuota('a', 'images', 1, march));
    expect(refused).toMatchObject({ code: 'quota_exceeded', status: 429, headers: { 'retry-after': '60' } });
    expect(refused!.message).toBe("The plan's monthly quota of 2 images is used up.");
    // A new month starts afresh.
    await limits.reserveQuota('a', 'images', 1, new Date('2026-04-01T00:00:00.000Z'));
  });

  it('a weight multiplies the cost (quality=best)', async () => {
    const limits = enforcer();
    expect(await failure(limits.reserveQuota('a', 'images', 1, march, 3))).toMatchObject({ code: 'quota_exceeded' });
    await limits.reserveQuota('a', 'mp', 1_500_000, march, 2);
    expect((await limits.standing('a', 'mp', march)).quota).toMatchObject({ used: 4 });
  });

  it('a refund gives the cost back: only delivered cutouts are charged', async () => {
    const limits = enforcer();
    const refund = await limits.reserveQuota('a', 'mp', 2_500_000, march);
    expect((await limits.standing('a', 'mp', march)).quota).toMatchObject({ used: 3 });
    await refund();
    expect((await limits.standing('a', 'mp', march)).quota).toMatchObject({ used: 0, remaining: 10 });
  });

  it('a plan without a quota: no charge, quota null in the standing', async () => {
    const limits = enforcer();
    await (await limits.reserveQuota('a', 'open', 50_000_000, march))();
    const standing = await limits.standing('a', 'open', march);
    expect(standing.quota).toBeNull();
    expect(standing.rate).toEqual({ limit: 100, remaining: 100, resetSeconds: 60 });
  });

  it('nextMonth: the first of the next month, UTC, across a year', () => {
    expect(nextMonth(new Date('2026-12-31T23:00:00.000Z')).toISOString()).toBe('2027-01-01T00:00:00.000Z');
    expect(nextMonth(new Date('2026-02-01T00:00:00.000Z')).toISOString()).toBe('2026-03-01T00:00:00.000Z');
  });

  it('quotaCost', () => {
    expect(quotaCost({ unit: 'images', amount: 5 }, 9_000_000)).toBe(1);
    expect(quotaCost({ unit: 'images', amount: 5 }, 9_000_000, 3)).toBe(3);
    expect(quotaCost({ unit: 'megapixels', amount: 5 }, 9_000_000)).toBe(9);
    expect(quotaCost({ unit: 'megapixels', amount: 5 }, 9_000_001, 2)).toBe(20);
    expect(quotaCost({ unit: 'megapixels', amount: 5 }, 1)).toBe(1);
  });
});

describe('usage', () => {
  it('each delivered cutout is metered: one image and its megapixels, per calendar month', async () => {
    const limits = enforcer();
    const may = new Date('2026-05-02T00:00:00.000Z');
    await limits.recordUsage('a', 2_500_000, may);
    await limits.recordUsage('a', 120_000, may);
    await limits.recordUsage('a', 1_000_000, new Date('2026-06-01T00:00:00.000Z'));
    expect((await limits.standing('a', 'open', may)).usage).toEqual({ month: '2026-05', images: 2, megapixels: 2.62 });
    expect((await limits.standing('b', 'open', may)).usage).toEqual({ month: '2026-05', images: 0, megapixels: 0 });
    expect(limits.hasPendingUsage).toBe(false);
  });
});

describe('plan policy', () => {
  it('output options: only those the plan lists; none listed means all', () => {
    expect(thrown(() => checkPlanOptions({ requestsPerMinute: 1, outputOptions: ['format'] }, ['format']))).toBeUndefined();
    const refused = thrown(() => checkPlanOptions({ requestsPerMinute: 1, outputOptions: ['format'] }, ['format', 'bg_color']));
    expect(refused).toMatchObject({ code: 'option_not_in_plan', status: 403 });
    expect(refused!.message).toBe('The plan does not include the option "bg_color".');
    expect(thrown(() => checkPlanOptions({ requestsPerMinute: 1 }, ['bg_color', 'crop']))).toBeUndefined();
  });

  it('qualities: only those the plan lists', () => {
    expect(thrown(() => checkPlanQuality({ requestsPerMinute: 1, qualities: ['fast', 'balanced'] }, 'balanced'))).toBeUndefined();
    const refused = thrown(() => checkPlanQuality({ requestsPerMinute: 1, qualities: ['fast', 'balanced'] }, 'best'));
    expect(refused).toMatchObject({ code: 'option_not_in_plan' });
    expect(refused!.message).toBe('The plan does not include quality=best; it includes fast, balanced.');
    expect(thrown(() => checkPlanQuality({ requestsPerMinute: 1, qualities: [] }, 'best'))!.message).toContain('it includes none');
    expect(thrown(() => checkPlanQuality({ requestsPerMinute: 1 }, 'best'))).toBeUndefined();
  });

  it('models: the default when none is asked; an unknown one is 400; one outside the plan is 403', () => {
    const models = { isnet: {}, u2net: {} };
    expect(chooseModel(undefined, { requestsPerMinute: 1 }, models, 'isnet')).toBe('isnet');
    expect(chooseModel('u2net', { requestsPerMinute: 1, models: ['u2net'] }, models, 'isnet')).toBe('u2net');
    const unknown = thrown(() => chooseModel('toString', { requestsPerMinute: 1 }, models, 'isnet'));
    expect(unknown).toMatchObject({ code: 'invalid_option', status: 400 });
    expect(unknown!.message).toBe('model: unknown model "toString"; models are isnet, u2net');
    expect(thrown(() => chooseModel('isnet', { requestsPerMinute: 1, models: ['u2net'] }, models, 'isnet'))).toMatchObject({
      code: 'option_not_in_plan',
      status: 403,
      message: 'The plan does not include the model "isnet".',
    });
  });

  it('upload size: the smaller of the plan\'s and the instance\'s', () => {
    expect(maxUploadBytes({ requestsPerMinute: 1, maxUploadBytes: 10 }, 20)).toBe(10);
    expect(maxUploadBytes({ requestsPerMinute: 1, maxUploadBytes: 30 }, 20)).toBe(20);
    expect(maxUploadBytes({ requestsPerMinute: 1 }, 20)).toBe(20);
  });

  it('image size: over maxInputMegapixels is 403 plan_image_too_large; size=full over maxOutputMegapixels is 403; the output cap is returned', () => {
    const plan = { requestsPerMinute: 1, maxInputMegapixels: 12, maxOutputMegapixels: 4 };
    expect(checkImageSize(plan, 12_000_000, { size: 'auto' })).toBe(4_000_000);
    const tooBig = thrown(() => checkImageSize(plan, 12_000_001, { size: 'auto' }));
    expect(tooBig).toMatchObject({ code: 'plan_image_too_large', status: 403 });
    expect(tooBig!.message).toBe('The image is 12.0 MP; the plan allows 12 MP.');
    expect(checkImageSize(plan, 4_000_000, { size: 'full' })).toBe(4_000_000);
    const full = thrown(() => checkImageSize(plan, 4_000_001, { size: 'full' }));
    expect(full).toMatchObject({ code: 'option_not_in_plan' });
    expect(full!.message).toBe('size=full would be 4.0 MP; the plan allows 4 MP of output (use size=auto).');
    expect(checkImageSize({ requestsPerMinute: 1 }, 100_000_000, { size: 'full' })).toBe(Infinity);
  });
});

describe('jobs: a plan\'s batch settings (docs/jobs.md: 100 images, results kept 24 h, unless the plan says)', () => {
  it('the defaults, and the plan\'s own values', () => {
    expect(jobLimitsOf({ requestsPerMinute: 1 })).toEqual({ maxBatchImages: 100, retentionMs: 24 * 3600 * 1000 });
    expect(jobLimitsOf({ requestsPerMinute: 1, maxBatchImages: 7, jobRetentionHours: 0.5 })).toEqual({ maxBatchImages: 7, retentionMs: 30 * 60 * 1000 });
  });
});

describe('PlanRates alone', () => {
  it('a plan it was not built with is a 500 internal_error naming it, for consume and peek', async () => {
    const rates = new PlanRates(PLANS, { prefix: 't', insurance: new Insurance('fail-closed', 1, false) });
    for (const call of [rates.consume('a', 'gold'), rates.peek('a', 'gold')]) {
      expect(await failure(call)).toMatchObject({ status: 500, code: 'internal_error', message: 'The account\'s plan "gold" is not configured.' });
    }
  });
});

describe('validatePlans', () => {
  const bad = (plans: unknown, known?: string[]) => thrown(() => validatePlans(plans, known))?.message;

  it('accepts the default plans and returns the table unchanged', () => {
    expect(validatePlans(DEFAULT_PLANS)).toBe(DEFAULT_PLANS);
    const full = { p: { requestsPerMinute: 1, burst: 0, monthlyQuota: { unit: 'megapixels', amount: 1 }, maxConcurrent: 1, maxUploadBytes: 1, maxInputMegapixels: 0.5, maxOutputMegapixels: 0.5, models: ['m'], outputOptions: ['format'], qualities: ['balanced'], maxBatchImages: 3, jobRetentionHours: 0.5 } };
    expect(validatePlans(full, ['format'])).toBe(full);
  });

  it.each([
    [null, 'plans must be an object of named plans'],
    [[], 'plans must be an object of named plans'],
    ['x', 'plans must be an object of named plans'],
    [{}, 'plans must name at least one plan'],
    [{ 'a b': { requestsPerMinute: 1 } }, 'plans.a b: plan names are 1-64 of [A-Za-z0-9_-]'],
    [{ ['p'.repeat(65)]: { requestsPerMinute: 1 } }, `plans.${'p'.repeat(65)}: plan names are 1-64 of [A-Za-z0-9_-]`],
    [{ p: null }, 'plans.p must be an object'],
    [{ p: 5 }, 'plans.p must be an object'],
    [{ p: { requestsPerMinute: 1, colour: 'red' } }, 'plans.p.colour is not a plan setting'],
    [{ p: {} }, 'plans.p.requestsPerMinute must be a positive integer'],
    [{ p: { requestsPerMinute: 0 } }, 'plans.p.requestsPerMinute must be a positive integer'],
    [{ p: { requestsPerMinute: 1.5 } }, 'plans.p.requestsPerMinute must be a positive integer'],
    [{ p: { requestsPerMinute: 1, maxConcurrent: 0 } }, 'plans.p.maxConcurrent must be a positive integer'],
    [{ p: { requestsPerMinute: 1, maxUploadBytes: -1 } }, 'plans.p.maxUploadBytes must be a positive integer'],
    [{ p: { requestsPerMinute: 1, burst: -1 } }, 'plans.p.burst must be an integer >= 0'],
    [{ p: { requestsPerMinute: 1, burst: 0.5 } }, 'plans.p.burst must be an integer >= 0'],
    [{ p: { requestsPerMinute: 1, maxInputMegapixels: 0 } }, 'plans.p.maxInputMegapixels must be > 0'],
    [{ p: { requestsPerMinute: 1, maxOutputMegapixels: 'big' } }, 'plans.p.maxOutputMegapixels must be > 0'],
    [{ p: { requestsPerMinute: 1, monthlyQuota: null } }, 'plans.p.monthlyQuota.unit must be "images" or "megapixels"'],
    [{ p: { requestsPerMinute: 1, monthlyQuota: { unit: 'bytes', amount: 1 } } }, 'plans.p.monthlyQuota.unit must be "images" or "megapixels"'],
    [{ p: { requestsPerMinute: 1, monthlyQuota: { unit: 'images', amount: 0 } } }, 'plans.p.monthlyQuota.amount must be a positive integer'],
    [{ p: { requestsPerMinute: 1, monthlyQuota: { unit: 'images', amount: 2.5 } } }, 'plans.p.monthlyQuota.amount must be a positive integer'],
    [{ p: { requestsPerMinute: 1, models: 'isnet' } }, 'plans.p.models must be a list of model names'],
    [{ p: { requestsPerMinute: 1, models: [1] } }, 'plans.p.models must be a list of model names'],
    [{ p: { requestsPerMinute: 1, models: ['isnet', 1] } }, 'plans.p.models must be a list of model names'],
    [{ p: { requestsPerMinute: 1, outputOptions: ['format', 1] } }, 'plans.p.outputOptions must be a list of option names'],
    [{ p: { requestsPerMinute: 1, qualities: 'best' } }, 'plans.p.qualities must be a list of fast, balanced, best'],
    [{ p: { requestsPerMinute: 1, qualities: ['balanced', 'ultra'] } }, 'plans.p.qualities must be a list of fast, balanced, best'],
    [{ p: { requestsPerMinute: 1, qualities: ['fast', 'best'] } }, 'plans.p.qualities must include "balanced" (the default)'],
    [{ p: { requestsPerMinute: 1, outputOptions: 'format' } }, 'plans.p.outputOptions must be a list of option names'],
    [{ p: { requestsPerMinute: 1, outputOptions: [1] } }, 'plans.p.outputOptions must be a list of option names'],
    [{ p: { requestsPerMinute: 1, maxBatchImages: 0 } }, 'plans.p.maxBatchImages must be a positive integer'],
    [{ p: { requestsPerMinute: 1, maxBatchImages: 2.5 } }, 'plans.p.maxBatchImages must be a positive integer'],
    [{ p: { requestsPerMinute: 1, jobRetentionHours: 0 } }, 'plans.p.jobRetentionHours must be > 0'],
    [{ p: { requestsPerMinute: 1, jobRetentionHours: 'week' } }, 'plans.p.jobRetentionHours must be > 0'],
    [{ p: { requestsPerMinute: 1, maxInputMegapixels: -2 } }, 'plans.p.maxInputMegapixels must be > 0'],
  ])('refuses %j: %s', (plans, message) => {
    expect(bad(plans)).toBe(message);
  });

  it('an output option the handler does not know is refused only when the known ones are given', () => {
    expect(bad({ p: { requestsPerMinute: 1, outputOptions: ['format', 'sparkle'] } }, ['format'])).toBe('plans.p.outputOptions: unknown option "sparkle"');
    expect(bad({ p: { requestsPerMinute: 1, outputOptions: ['sparkle'] } })).toBeUndefined();
  });

  it('loadPlansFile: reads { plans }, names the file in every error', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'bgcut-plans-'));
    const file = (name: string, text: string) => {
      writeFileSync(path.join(dir, name), text);
      return path.join(dir, name);
    };
    expect(loadPlansFile(file('ok.json', JSON.stringify({ plans: { p: { requestsPerMinute: 2 } } })))).toEqual({ p: { requestsPerMinute: 2 } });
    const notJson = path.join(dir, 'bad.json');
    expect(thrown(() => loadPlansFile(file('bad.json', '{')))!.message).toMatch(new RegExp(`^cannot read plans file ${notJson}: `));
    const invalid = thrown(() => loadPlansFile(file('invalid.json', JSON.stringify({ plans: { p: {} } }))));
    expect(invalid).toBeInstanceOf(RangeError);
    expect(invalid!.message).toBe(`${path.join(dir, 'invalid.json')}: plans.p.requestsPerMinute must be a positive integer`);
    expect(thrown(() => loadPlansFile(file('null.json', 'null')))!.message).toBe(`${path.join(dir, 'null.json')}: plans must be an object of named plans`);
    expect(thrown(() => loadPlansFile(file('unknown.json', JSON.stringify({ plans: { p: { requestsPerMinute: 1, outputOptions: ['x'] } } })), ['format']))!.message).toContain('unknown option "x"');
  });
});

describe('InFlight: requests this instance works on at once', () => {
  it('gives at most `max` places, each released once, and reports every change', () => {
    const counts: number[] = [];
    const inFlight = new InFlight(2, (n) => counts.push(n));
    const a = inFlight.tryReserve()!;
    const b = inFlight.tryReserve()!;
    expect(inFlight.tryReserve()).toBeUndefined();
    expect(inFlight.current).toBe(2);
    a();
    a(); // twice: once counted
    expect(inFlight.current).toBe(1);
    expect(inFlight.tryReserve()).toBeDefined();
    b();
    expect(counts).toEqual([1, 2, 1, 2, 1]);
    expect(inFlight.max).toBe(2);
  });

  it('close(): no more places; true at once when none is held', async () => {
    const inFlight = new InFlight(2);
    expect(inFlight.closing).toBe(false);
    expect(await inFlight.close(1000)).toBe(true);
    expect(inFlight.closing).toBe(true);
    expect(inFlight.tryReserve()).toBeUndefined();
  });

  it('close(): true once the last place is back, false when the time runs out first', async () => {
    vi.useFakeTimers();
    const inFlight = new InFlight(3);
    const a = inFlight.tryReserve()!;
    const b = inFlight.tryReserve()!;
    let drained: boolean | undefined;
    void inFlight.close(1000).then((d) => (drained = d));
    a();
    await vi.advanceTimersByTimeAsync(10);
    expect(drained).toBeUndefined(); // one still held
    b();
    await vi.advanceTimersByTimeAsync(0);
    expect(drained).toBe(true);
    // A late timer does not change the answer.
    await vi.advanceTimersByTimeAsync(2000);
    expect(drained).toBe(true);

    const stuck = new InFlight(1);
    const held = stuck.tryReserve()!;
    let answer: boolean | undefined;
    void stuck.close(500).then((d) => (answer = d));
    await vi.advanceTimersByTimeAsync(499);
    expect(answer).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(answer).toBe(false);
    held(); // released after the timeout: nothing waits any more
    expect(stuck.current).toBe(0);
  });
});
