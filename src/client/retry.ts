/** How the client retries 429 and 503 answers (and failed connections). */
export interface RetryOptions {
  /** Retries after the first attempt. Default 4. */
  maxRetries?: number;
  /** Total time the attempts and waits of one call may take, in ms; a wait that would pass it is not made. Default 60 000. */
  maxElapsedMs?: number;
  /** First backoff when the server gives no Retry-After, in ms; doubled each retry. Default 500. */
  baseDelayMs?: number;
  /** Longest single wait without Retry-After, in ms. Default 10 000. */
  maxDelayMs?: number;
  /** Retry when the API cannot be reached at all. Default true. */
  onConnectionError?: boolean;
}

export type ResolvedRetry = Required<RetryOptions>;

export function resolveRetry(options: RetryOptions = {}): ResolvedRetry {
  const resolved = {
    maxRetries: options.maxRetries ?? 4,
    maxElapsedMs: options.maxElapsedMs ?? 60_000,
    baseDelayMs: options.baseDelayMs ?? 500,
    maxDelayMs: options.maxDelayMs ?? 10_000,
    onConnectionError: options.onConnectionError ?? true,
  };
  for (const name of ['maxRetries', 'maxElapsedMs', 'baseDelayMs', 'maxDelayMs'] as const) {
    if (!Number.isFinite(resolved[name]) || resolved[name] < 0) throw new RangeError(`retry.${name} must be a number >= 0`);
  }
  return resolved;
}

/**
 * The wait before retry number `retry` (1-based). With Retry-After: that long, plus up to 20 %
 * more, so clients told the same time do not all come back at once. Without: exponential
 * backoff with full jitter.
 */
export function retryDelayMs(retry: number, retryAfterSeconds: number | undefined, options: ResolvedRetry, random: () => number): number {
  if (retryAfterSeconds !== undefined) return Math.round(retryAfterSeconds * 1000 * (1 + 0.2 * random()));
  const ceiling = Math.min(options.maxDelayMs, options.baseDelayMs * 2 ** (retry - 1));
  return Math.round(ceiling * (0.5 + 0.5 * random()));
}

/** Retry-After as seconds: delta-seconds or an HTTP date. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  if (/^\s*\d+\s*$/.test(value)) return Number(value);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, (date - now) / 1000);
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
