import { ApiError } from '../errors.js';

/**
 * What to do while Redis cannot be reached:
 * - `fail-closed`: answer 503 (never 401 or 429), so no limit is ever exceeded;
 * - `insurance`: keep serving under per-instance in-memory limits, each instance allowing
 *   `1 / insuranceInstances` of every plan's rate, burst, quota and concurrency.
 * Either way, the shared limits take over again by themselves once Redis is back.
 */
export type RedisFailureMode = 'fail-closed' | 'insurance';

export const unavailable = (what: string, cause: unknown) =>
  new ApiError('service_unavailable', { detail: `The ${what} cannot be reached.`, headers: { 'retry-after': '5' }, cause });

/**
 * The fallback between a shared (Redis) store and this instance's memory store of the same
 * interface: each limiter asks it to run one step against the shared store and, when that fails,
 * either against the memory store at this instance's share of the limit (`insurance`) or not at
 * all (503, `fail-closed`). Without Redis the "shared" store is the memory one and a failure is
 * passed on as it is.
 */
export class Insurance {
  constructor(
    readonly mode: RedisFailureMode,
    /** API instances sharing Redis: each one's share of a limit while Redis is away is 1/n. */
    private readonly instances: number,
    /** False when the limits are in memory (one instance): nothing to fall back from. */
    readonly shared: boolean,
  ) {}

  get enabled(): boolean {
    return this.mode === 'insurance';
  }

  /** This instance's part of a plan limit while Redis is away (at least 1). */
  share(amount: number): number {
    return Math.max(1, Math.floor(amount / this.instances));
  }

  /**
   * Runs `shared`; when it fails, runs `fallback` (insurance) or throws 503 (fail-closed). An
   * abort is passed on. `onFailure` hears the shared store's failure first, whichever way it goes.
   */
  async run<T>(
    what: string,
    signal: AbortSignal | undefined,
    shared: () => Promise<T>,
    fallback: () => Promise<T>,
    onFailure: (error: unknown) => void = () => {},
  ): Promise<{ value: T; fellBack: boolean }> {
    try {
      return { value: await shared(), fellBack: false };
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      if (!this.shared) throw error; // in-memory limits: not an outage
      onFailure(error);
      if (!this.enabled) throw unavailable(what, error);
      return { value: await fallback(), fellBack: true };
    }
  }
}
