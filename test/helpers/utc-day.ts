const DAY_MS = 86_400_000;

/** Milliseconds from `now` to the next UTC midnight (the next day, and on the 1st the next month). */
export function msToUtcMidnight(now = Date.now()): number {
  return (Math.floor(now / DAY_MS) + 1) * DAY_MS - now;
}

/**
 * For a test that reads "today" or "this month" from parts whose clock it cannot set (a browser,
 * another process): if the next UTC midnight is less than `withinMs` away, waits until just past
 * it, so a test that takes less than `withinMs` sees one UTC day, and one month, throughout.
 * Costs at most `withinMs`, and only when started that close to midnight.
 */
export async function clearOfUtcMidnight(withinMs: number, now = Date.now()): Promise<number> {
  const left = msToUtcMidnight(now);
  if (left >= withinMs) return 0;
  const wait = left + 1_000;
  await new Promise((resolve) => setTimeout(resolve, wait));
  return wait;
}
