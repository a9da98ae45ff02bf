/**
 * Waits for `work`, or rejects with the signal's reason as soon as it aborts. Work already under
 * way cannot be taken back, so whatever it yields after the abort is handed to `disposeLate`
 * (a slot acquired, a quota reserved) to be given back: nothing is held for a request that left.
 */
export function untilAborted<T>(work: Promise<T>, signal: AbortSignal, disposeLate?: (value: T) => unknown): Promise<T> {
  const late = (value: T) => {
    if (!disposeLate) return;
    void Promise.resolve()
      .then(() => disposeLate(value))
      .catch(() => {});
  };
  if (signal.aborted) {
    work.then(late, () => {});
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    let gone = false;
    const onAbort = () => {
      gone = true;
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        if (gone) late(value);
        else resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        if (!gone) reject(error);
      },
    );
  });
}
