/**
 * Waits for an event (a promise), with a deadline only as a backstop: a test waits on what
 * happens, not on the clock, and when the event never comes it fails saying what was seen
 * instead of running into the test's own timeout.
 */
export async function within<T>(event: Promise<T>, ms: number, seen: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no event within ${ms} ms; seen: ${seen()}`)), ms);
  });
  try {
    return await Promise.race([event, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/** A promise and the function that resolves it, for an event a callback reports. */
export function signal<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}
