import { describe, expect, it } from 'vitest';
import type { AccountSummary } from '../src/core/account-summary.js';
import { lastDays } from '../src/core/index.js';
import type { PageContext } from '../src/dashboard/pages/layout.js';
import { tryPage } from '../src/dashboard/pages/try.js';
import { usagePage } from '../src/dashboard/pages/usage.js';

/** The pages as rendered (server-side HTML), read as text the way a person reads them. */
const ctx: PageContext = { base: '/dashboard', title: '', product: 'bgcut', accountId: 'acct_ada', csrfToken: 't', embedded: true };
const text = (html: { value: string }) =>
  html.value
    .replace(/<[^>]+>/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();

function summary(unit: 'images' | 'megapixels'): AccountSummary {
  return {
    account: { id: 'acct_ada', status: 'active' },
    keyId: '',
    plan: {
      name: 'pro',
      requestsPerMinute: 120,
      burst: 60,
      maxConcurrent: 8,
      maxUploadBytes: 25 * 1048576,
      maxInputMegapixels: 50,
      maxOutputMegapixels: null,
      monthlyQuota: { unit, amount: 20_000 },
      outputOptions: null,
      qualities: null,
      models: ['isnet'],
    },
    // Seven small cutouts: 1.8 megapixels processed, each charged its size rounded up to a whole megapixel.
    usage: { month: '2026-11', images: 7, megapixels: 1.8 },
    quota: { unit, amount: 20_000, used: 7, remaining: 19_993, resetsAt: '2026-12-01T00:00:00.000Z' },
    rate: { limit: 120, remaining: 120, resetSeconds: 60 },
    inProgress: 0,
  };
}

describe('usage page', () => {
  it('names a megapixel quota in credits, with the rule that makes 1.8 megapixels processed count 7', () => {
    const page = text(usagePage(ctx, { summary: summary('megapixels'), daily: { days: lastDays(30), requests: Array(30).fill(0) } }));
    expect(page).toContain('Megapixels processed 1.8');
    expect(page).toContain('7 of 20,000 megapixel credits used');
    expect(page).toContain('Each cutout uses its size in megapixels, rounded up (at least 1); quality best uses 3 times as many.');
    expect(page).toContain('Monthly quota 20,000 megapixel credits');
    expect(page).not.toMatch(/\d megapixels used/);
  });

  it('names an image quota in credits too (quality best counts 3)', () => {
    const page = text(usagePage(ctx, { summary: summary('images'), daily: { days: lastDays(30), requests: Array(30).fill(0) } }));
    expect(page).toContain('7 of 20,000 image credits used');
    expect(page).toContain('Each cutout uses 1; quality best uses 3 times as many.');
  });
});

describe('Try it page', () => {
  const view = { formats: ['png'], canCrop: true, canColor: true, qualities: ['fast', 'balanced', 'best'], models: ['isnet'] };

  it('offers the quality modes, balanced chosen, and says what best costs', () => {
    const html = tryPage(ctx, view).value;
    expect(html).toMatch(/<label for="quality">Quality<\/label>/);
    const options = [...html.matchAll(/<option value="(fast|balanced|best)"( selected)?>([^<]+)</g)].map((m) => [m[1], Boolean(m[2]), m[3]]);
    expect(options).toEqual([
      ['fast', false, 'Fast'],
      ['balanced', true, 'Balanced'],
      ['best', false, 'Best (3 model passes, counts 3×)'],
    ]);
  });

  it('offers a model only when the plan has several', () => {
    expect(tryPage(ctx, view).value).not.toContain('name="model"');
    const html = tryPage(ctx, { ...view, models: ['isnet', 'isnet-fp16'] }).value;
    expect([...html.matchAll(/<option value="(isnet[^"]*)">/g)].map((m) => m[1])).toEqual(['isnet', 'isnet-fp16']);
  });
});
