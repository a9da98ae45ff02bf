import { afterEach, describe, expect, it, vi } from 'vitest';
import { clearOfUtcMidnight, msToUtcMidnight } from '../helpers/utc-day.js';

describe('clearOfUtcMidnight (a test helper for tests that read "today" from clocks they cannot set)', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('at 23:59:00 on the last day of a month, a test that takes up to 2 minutes starts just past midnight, on the 1st', async () => {
    vi.useFakeTimers();
    vi.setSystemTime(new Date('2026-11-30T23:59:00.000Z'));
    expect(msToUtcMidnight()).toBe(60_000);
    let waited: number | undefined;
    void clearOfUtcMidnight(120_000).then((ms) => (waited = ms));
    await vi.advanceTimersByTimeAsync(60_000);
    expect(waited).toBeUndefined(); // still 30 November
    await vi.advanceTimersByTimeAsync(1_000);
    expect(waited).toBe(61_000);
    expect(new Date().toISOString()).toBe('2026-12-01T00:00:01.000Z');
  });

  it('far from midnight it does not wait', async () => {
    vi.useFakeTimers();
    vi.setSystemTime(new Date('2026-11-30T12:00:00.000Z'));
    expect(await clearOfUtcMidnight(120_000)).toBe(0);
  });
});
