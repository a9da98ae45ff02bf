import { randomUUID } from 'node:crypto';
import { tag, type RedisClient } from '../redis.js';
import { OP_MEMORY_SECONDS } from './quota-store.js';

export interface Usage {
  /** Calendar month, UTC, as YYYY-MM. */
  month: string;
  images: number;
  megapixels: number;
}

/** Successful cutouts per account and month. */
export interface UsageMeter {
  /**
   * Records `images` cutouts (default 1) of `megapixels` in all, once per `op` however often it
   * is sent (a record whose reply was lost is retried under the same op).
   */
  add(accountId: string, month: string, megapixels: number, images?: number, op?: string): Promise<void>;
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

/** Usage is kept 400 days, for billing. */
const USAGE_TTL_SECONDS = 400 * 86400;

// KEYS: usage hash, operation record, the day's month's per-day hash. ARGV: images, megapixels,
// hash ttl, op ttl, day (YYYY-MM-DD). The month's total and its day are written together, once.
const ADD = `
if not redis.call('SET', KEYS[2], 'recorded', 'NX', 'EX', ARGV[4]) then return 0 end
redis.call('HINCRBY', KEYS[1], 'images', ARGV[1])
redis.call('HINCRBYFLOAT', KEYS[1], 'megapixels', ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('HINCRBY', KEYS[3], ARGV[5] .. ':images', ARGV[1])
redis.call('HINCRBYFLOAT', KEYS[3], ARGV[5] .. ':megapixels', ARGV[2])
redis.call('EXPIRE', KEYS[3], ARGV[3])
return 1
`;

/**
 * The hash of an account's charged cutouts per day of `month` (fields `<day>:images` and
 * `<day>:megapixels`), under the account's hash tag beside its month total. The dashboard's
 * RedisDashboardStore reads it for the usage page's daily chart.
 */
export function redisDailyUsageKey(prefix: string, accountId: string, month: string): string {
  return `${prefix}:${tag('a', accountId)}:usage-days:${month}`;
}

/** One hash per account and month, written by one script per record (applied once per op). */
export class RedisUsageMeter implements UsageMeter {
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    /** The clock that dates each record's day (tests inject one). */
    private readonly now: () => Date = () => new Date(),
  ) {}

  async add(accountId: string, month: string, megapixels: number, images = 1, op: string = randomUUID()): Promise<void> {
    // The day the cutout is recorded on, in that day's own month (a record just after midnight
    // on the 1st still belongs to the month it was charged in, but to the new day).
    const day = this.now().toISOString().slice(0, 10);
    await this.redis.eval(
      ADD,
      3,
      this.key(accountId, month),
      `${this.prefix}:${tag('a', accountId)}:op:${op}`,
      redisDailyUsageKey(this.prefix, accountId, day.slice(0, 7)),
      images,
      round(megapixels),
      USAGE_TTL_SECONDS,
      OP_MEMORY_SECONDS,
      day,
    );
  }

  async get(accountId: string, month: string): Promise<Usage> {
    const data = await this.redis.hgetall(this.key(accountId, month));
    return { month, images: Number(data.images ?? 0), megapixels: round(Number(data.megapixels ?? 0)) };
  }

  private key(accountId: string, month: string): string {
    // The account's hash tag: the hash and the operation record sit in one Cluster slot.
    return `${this.prefix}:${tag('a', accountId)}:usage:${month}`;
  }
}
