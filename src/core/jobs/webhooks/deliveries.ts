import type { RedisClient } from '../../redis.js';

export interface DeliveryAttempt {
  at: string;
  /** The receiver's HTTP status, or 0 when none came (refused, unreachable, timed out). */
  status: number;
  /** Why no 2xx, in a few words (never the receiver's body). */
  error?: string;
  ms: number;
}

/** One event's delivery to one callback: its `webhook-id`, and every attempt. */
export interface Delivery {
  /** The `webhook-id`: the same for every attempt, so receivers can drop repeats. */
  id: string;
  accountId: string;
  jobId: string;
  type: string;
  /** The callback's origin and path (not its query, which may carry a token). */
  url: string;
  state: 'pending' | 'delivered' | 'failed';
  createdAt: string;
  attempts: DeliveryAttempt[];
}

/**
 * The deliveries of each account, newest first, for the dashboard; and the one place that
 * decides which instance sends an event (`claim`), so each event is sent once.
 */
export interface DeliveryLog {
  /** Records a new delivery; false when one with its id exists (another instance sends it). */
  claim(delivery: Delivery): Promise<boolean>;
  update(delivery: Delivery): Promise<void>;
  list(accountId: string, limit?: number): Promise<Delivery[]>;
}

/** Most deliveries kept per account. */
export const DELIVERIES_KEPT = 100;

export class MemoryDeliveryLog implements DeliveryLog {
  private readonly byAccount = new Map<string, Delivery[]>();

  async claim(delivery: Delivery): Promise<boolean> {
    const list = this.byAccount.get(delivery.accountId) ?? [];
    if (list.some((d) => d.id === delivery.id)) return false;
    list.unshift(structuredClone(delivery));
    list.length = Math.min(list.length, DELIVERIES_KEPT);
    this.byAccount.set(delivery.accountId, list);
    return true;
  }

  async update(delivery: Delivery): Promise<void> {
    const list = this.byAccount.get(delivery.accountId) ?? [];
    const index = list.findIndex((d) => d.id === delivery.id);
    if (index >= 0) list[index] = structuredClone(delivery);
  }

  async list(accountId: string, limit = DELIVERIES_KEPT): Promise<Delivery[]> {
    return structuredClone((this.byAccount.get(accountId) ?? []).slice(0, limit));
  }
}

/** Kept 30 days after the account's last delivery. */
const TTL_SECONDS = 30 * 86400;

// KEYS: data hash, index zset. ARGV: id, json, score, kept, ttl. HSETNX decides who sends.
const CLAIM = `
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
local old = redis.call('ZRANGE', KEYS[2], 0, -tonumber(ARGV[4]) - 1)
if #old > 0 then
  redis.call('ZREM', KEYS[2], unpack(old))
  redis.call('HDEL', KEYS[1], unpack(old))
end
redis.call('EXPIRE', KEYS[1], ARGV[5])
redis.call('EXPIRE', KEYS[2], ARGV[5])
return 1
`;

/** Deliveries in Redis: a hash of them and an index by time, per account (hash-tagged by account). */
export class RedisDeliveryLog implements DeliveryLog {
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix = 'bgcut',
  ) {}

  async claim(delivery: Delivery): Promise<boolean> {
    const [data, index] = this.keys(delivery.accountId);
    return (await this.redis.eval(CLAIM, 2, data, index, delivery.id, JSON.stringify(delivery), Date.parse(delivery.createdAt), DELIVERIES_KEPT, TTL_SECONDS)) === 1;
  }

  async update(delivery: Delivery): Promise<void> {
    await this.redis.hset(this.keys(delivery.accountId)[0], delivery.id, JSON.stringify(delivery));
  }

  async list(accountId: string, limit = DELIVERIES_KEPT): Promise<Delivery[]> {
    const [data, index] = this.keys(accountId);
    const ids = await this.redis.zrevrange(index, 0, limit - 1);
    if (ids.length === 0) return [];
    const values = await this.redis.hmget(data, ...ids);
    return values.filter((v): v is string => v !== null).map((v) => JSON.parse(v) as Delivery);
  }

  private keys(accountId: string): [string, string] {
    return [`${this.prefix}:deliveries:{${accountId}}`, `${this.prefix}:deliveries-index:{${accountId}}`];
  }
}
