import type { RedisClient } from '../core/redis.js';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';

export interface SignInThrottleOptions {
  /** Wrong passwords for one email from one client address before that pair is locked for `windowSeconds`. Default 5. */
  perEmailAndAddress?: number;
  /** Wrong passwords from one client address, whatever the email, before the address is locked for `windowSeconds`. Default 20. */
  perAddress?: number;
  /** Wrong passwords for one email from all addresses together in 24 hours before the email is locked until that day is over. Default 50. */
  perEmailPerDay?: number;
  /** Wrong current passwords on one account's password-change form before that form is locked for `windowSeconds`. Default 5. */
  passwordChangePerAccount?: number;
  /** The window and lock-out, in seconds. Default 900 (15 minutes). */
  windowSeconds?: number;
}

/** An attempt that may go ahead: it has been counted already; `settle` says how it ended. */
export interface Admitted {
  allowed: true;
  /**
   * A right password gives its points back (and clears the consecutive-failure count); a wrong
   * one keeps them. Resolves with the seconds the caller is now locked out for (0 when not).
   */
  settle(valid: boolean): Promise<number>;
  /**
   * Tries left before a lock, counting this one as failed (the fewest of any counter), and how
   * long that lock would last: so a page can warn before the try that locks.
   */
  remaining: number;
  lockSecondsAfterLast: number;
}

export interface Refused {
  allowed: false;
  /** Seconds until another try may be made. */
  retryAfterSeconds: number;
}

interface Counter {
  limiter: RateLimiterAbstract;
  /** Lock-out set once the last point is used (0: none beyond the window's own end). */
  blockSeconds: number;
  /** A success deletes the count (consecutive failures) instead of giving one point back. */
  resetOnSuccess: boolean;
}

const DAY_SECONDS = 86_400;

/**
 * Sign-in and password-change throttling with rate-limiter-flexible, after its login-endpoint
 * recipe: every attempt consumes a point BEFORE the password is checked, so parallel guesses
 * cannot all pass a check made before any of them was counted; a right password gives the
 * points back. Sign-in is counted per email and client address (someone else's wrong guesses
 * do not lock a holder out), per address (one address trying many emails), and per email over
 * a day (many addresses trying one email). Password changes are counted per account, apart
 * from sign-in. Counts live in Redis when there is one, so every instance shares them.
 */
export class SignInThrottle {
  readonly perEmailAndAddress: number;
  readonly perAddress: number;
  readonly perEmailPerDay: number;
  readonly passwordChangePerAccount: number;
  readonly windowSeconds: number;
  private readonly byEmailAndAddress: Counter;
  private readonly byAddress: Counter;
  private readonly byEmailPerDay: Counter;
  private readonly byAccountPasswordChange: Counter;

  constructor(options: SignInThrottleOptions, redis: RedisClient | undefined, prefix: string) {
    // The one option of earlier versions that no longer exists: refused rather than ignored.
    if ('perEmail' in options) {
      throw new RangeError('dashboard throttle.perEmail is gone: failures are counted per email and client address (perEmailAndAddress, default 5) and per email over a day (perEmailPerDay, default 50)');
    }
    this.perEmailAndAddress = positive('perEmailAndAddress', options.perEmailAndAddress ?? 5);
    this.perAddress = positive('perAddress', options.perAddress ?? 20);
    this.perEmailPerDay = positive('perEmailPerDay', options.perEmailPerDay ?? 50);
    this.passwordChangePerAccount = positive('passwordChangePerAccount', options.passwordChangePerAccount ?? 5);
    this.windowSeconds = positive('windowSeconds', options.windowSeconds ?? 900);
    const make = (name: string, points: number, duration: number, blockSeconds: number, resetOnSuccess: boolean): Counter => {
      const common = { keyPrefix: `${prefix}:signin:${name}`, points, duration };
      const limiter = redis ? new RateLimiterRedis({ ...common, storeClient: redis, rejectIfRedisNotReady: true }) : new RateLimiterMemory(common);
      return { limiter, blockSeconds, resetOnSuccess };
    };
    const window = this.windowSeconds;
    this.byEmailAndAddress = make('email-address', this.perEmailAndAddress, window, window, true);
    this.byAddress = make('address', this.perAddress, window, window, false);
    this.byEmailPerDay = make('email-day', this.perEmailPerDay, DAY_SECONDS, 0, false);
    this.byAccountPasswordChange = make('password-change', this.passwordChangePerAccount, window, window, true);
  }

  /** Counts a sign-in attempt of `email` from `address`, before its password is checked. */
  signIn(email: string, address: string): Promise<Admitted | Refused> {
    // Narrowest first: once the attacker's own pair is locked, its further tries are refused
    // before they can use up the address's or, worse, the email's daily allowance.
    return this.attempt([
      [this.byEmailAndAddress, `${email}\n${address}`],
      [this.byAddress, address],
      [this.byEmailPerDay, email],
    ]);
  }

  /** Counts an attempt to change `accountId`'s password, before its current password is checked. */
  passwordChange(accountId: string): Promise<Admitted | Refused> {
    return this.attempt([[this.byAccountPasswordChange, accountId]]);
  }

  private async attempt(counters: Array<[Counter, string]>): Promise<Admitted | Refused> {
    const consumed: Array<{ counter: Counter; key: string; res: RateLimiterRes }> = [];
    for (const [counter, key] of counters) {
      try {
        consumed.push({ counter, key, res: await counter.limiter.consume(key) });
      } catch (error) {
        if (!(error instanceof RateLimiterRes)) throw error;
        // Refused here: the counts taken before this one were for a try that is not made.
        await Promise.all(consumed.map(({ counter: c, key: k }) => c.limiter.reward(k, 1)));
        return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil(error.msBeforeNext / 1000)) };
      }
    }
    const tightest = consumed.reduce((a, b) => (b.res.remainingPoints < a.res.remainingPoints ? b : a));
    return {
      allowed: true,
      remaining: tightest.res.remainingPoints,
      lockSecondsAfterLast: tightest.counter.blockSeconds || Math.ceil(tightest.res.msBeforeNext / 1000),
      settle: async (valid) => {
        if (valid) {
          await Promise.all(consumed.map(({ counter, key }) => (counter.resetOnSuccess ? counter.limiter.delete(key) : counter.limiter.reward(key, 1))));
          return 0;
        }
        // This failure used a last point: lock now, so the person learns it on this answer.
        const waits = await Promise.all(
          consumed
            .filter(({ res }) => res.remainingPoints === 0)
            .map(async ({ counter, key, res }) => {
              if (counter.blockSeconds === 0) return Math.ceil(res.msBeforeNext / 1000);
              await counter.limiter.block(key, counter.blockSeconds);
              return counter.blockSeconds;
            }),
        );
        return Math.max(0, ...waits);
      },
    };
  }
}

function positive(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1) throw new RangeError(`dashboard throttle.${name} must be a positive integer, got ${value}`);
  return value;
}
