import type { Redis } from 'ioredis';

export interface Usage {
  /** Calendar month, UTC, as YYYY-MM. */
  month: string;
  images: number;
  megapixels: number;
}

/** Successful cutouts per account and month. */
export interface UsageMeter {
  /** Records `images` cutouts (default 1) of `megapixels` in all. */
  add(accountId: string, month: string, megapixels: number, images?: number): Promise<void>;
  get(accountId: string, month: string): Promise<Usage>;
}

export function monthOf(date: Date): string {
  return date.toISOString().slice(0, 7);
}

const round = (mp: number) => Math.round(mp * 1e4) / 1e4;

export class MemoryUsageMeter implements UsageMeter {
  private readonly usage = new Map<string, Usage>();

  async add(accountId: string, month: string, megapixels: number, images = 1): Promise<void> {
    const entry = this.usage.get(`${accountId}:${month}`) ?? { month, images: 0, megapixels: 0 };
    entry.images += images;
    entry.megapixels = round(entry.megapixels + megapixels);
    this.usage.set(`${accountId}:${month}`, entry);
  }

  async get(accountId: string, month: string): Promise<Usage> {
    return { ...(this.usage.get(`${accountId}:${month}`) ?? { month, images: 0, megapixels: 0 }) };
  }
}

/** One hash per account and month; kept for 400 days for billing. */
export class RedisUsageMeter implements UsageMeter {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  async add(accountId: string, month: string, megapixels: number, images = 1): Promise<void> {
    const key = this.key(accountId, month);
    await this.redis
      .multi()
      .hincrby(key, 'images', images)
      .hincrbyfloat(key, 'megapixels', round(megapixels))
      .expire(key, 400 * 86400)
      .exec();
  }

  async get(accountId: string, month: string): Promise<Usage> {
    const data = await this.redis.hgetall(this.key(accountId, month));
    return { month, images: Number(data.images ?? 0), megapixels: round(Number(data.megapixels ?? 0)) };
  }

  private key(accountId: string, month: string): string {
    return `${this.prefix}:usage:${accountId}:${month}`;
  }
}
