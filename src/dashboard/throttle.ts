import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';

export interface SignInThrottleOptions {
  /** Wrong passwords for one email before it is locked for `windowSeconds`. Default 5. */
  perEmail?: number;
  /** Wrong passwords from one client address before it is locked. Default 20. */
  perAddress?: number;
  /** The window and lock-out, in seconds. Default 900 (15 minutes). */
  windowSeconds?: number;
}

/**
 * Sign-in throttling with rate-limiter-flexible: failures are counted per email and per client
 * address (in Redis when there is one, so every instance shares them); once either count is
 * reached, further tries are refused, right or wrong, until the window passes. A success clears
 * the email's count.
 */
export class SignInThrottle {
  readonly perEmail: number;
  readonly perAddress: number;
  private readonly byEmail: RateLimiterAbstract;
  private readonly byAddress: RateLimiterAbstract;

  constructor(options: SignInThrottleOptions, redis: Redis | undefined, prefix: string) {
    this.perEmail = options.perEmail ?? 5;
    this.perAddress = options.perAddress ?? 20;
    const duration = options.windowSeconds ?? 900;
    const make = (name: string, points: number): RateLimiterAbstract =>
      redis
        ? new RateLimiterRedis({ storeClient: redis, keyPrefix: `${prefix}:signin:${name}`, points, duration, blockDuration: duration, rejectIfRedisNotReady: true })
        : new RateLimiterMemory({ keyPrefix: `${prefix}:signin:${name}`, points, duration, blockDuration: duration });
    this.byEmail = make('email', this.perEmail);
    this.byAddress = make('address', this.perAddress);
  }

  /** Seconds until sign-in may be tried again, or 0 when it may be tried now. */
  async lockedFor(email: string, address: string): Promise<number> {
    const [e, a] = await Promise.all([this.byEmail.get(email), this.byAddress.get(address)]);
    const wait = (res: RateLimiterRes | null, limit: number) => (res && res.consumedPoints >= limit ? Math.ceil(res.msBeforeNext / 1000) : 0);
    return Math.max(wait(e, this.perEmail), wait(a, this.perAddress));
  }

  async failed(email: string, address: string): Promise<void> {
    const swallowLimit = (error: unknown) => {
      if (!(error instanceof RateLimiterRes)) throw error;
    };
    await Promise.all([this.byEmail.consume(email).catch(swallowLimit), this.byAddress.consume(address).catch(swallowLimit)]);
  }

  async succeeded(email: string): Promise<void> {
    await this.byEmail.delete(email);
  }
}
