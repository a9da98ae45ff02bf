import type { RedisClient } from '../redis.js';
import type { ImageStatus, JobRecord } from './job.js';
import type { JobPatch, JobStore } from './job-store.js';

/** Longest a job's record lives before it ends (then its plan's retention applies): 30 days. */
const UNFINISHED_TTL_MS = 30 * 86_400_000;

/**
 * Jobs in Redis, one hash each: `job` (the record as created, without its images), its changing
 * fields (state, times) and `img:<n>` per image, each written alone (HSET), so instances running images of one job never overwrite each other.
 * Keys are `<prefix>:job:{<id>}`: the id is a hash tag, as a Redis Cluster would need.
 */
export class RedisJobStore implements JobStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix = 'bgcut',
  ) {}

  async create(job: JobRecord): Promise<void> {
    const { images, ...record } = job;
    const fields: Record<string, string> = { job: JSON.stringify(record) };
    images.forEach((image, n) => (fields[`img:${n}`] = JSON.stringify(image)));
    await this.redis.multi().hset(this.key(job.id), fields).pexpire(this.key(job.id), UNFINISHED_TTL_MS).exec();
  }

  async get(id: string): Promise<JobRecord | undefined> {
    const data = await this.redis.hgetall(this.key(id));
    if (!data.job) return undefined;
    const record = JSON.parse(data.job) as Omit<JobRecord, 'images'>;
    for (const name of PATCHABLE) if (data[name] !== undefined) (record as Record<string, unknown>)[name] = data[name];
    const images: ImageStatus[] = record.sources.map((_, n) => (data[`img:${n}`] ? (JSON.parse(data[`img:${n}`]!) as ImageStatus) : { state: 'queued' }));
    return { ...record, images };
  }

  async setImage(id: string, n: number, status: ImageStatus): Promise<void> {
    // Only on a job that still exists: a late write must not bring back a forgotten one.
    await this.redis.eval(SET_IF_EXISTS, 1, this.key(id), `img:${n}`, JSON.stringify(status));
  }

  async update(id: string, patch: JobPatch): Promise<void> {
    // Each changing field is a field of its own: no read-modify-write, nothing to lose to a race.
    const pairs = Object.entries(patch).filter(([, value]) => value !== undefined).flat() as string[];
    if (pairs.length > 0) await this.redis.eval(SET_IF_EXISTS, 1, this.key(id), ...pairs);
  }

  async forgetAt(id: string, at: number): Promise<void> {
    await this.redis.pexpireat(this.key(id), Math.round(at));
  }

  private key(id: string): string {
    return `${this.prefix}:job:{${id}}`;
  }
}

/** The fields of the record that change after it is created, each kept as a field of the hash. */
const PATCHABLE = ['state', 'startedAt', 'finishedAt', 'expiresAt'] as const;

// ARGV: field, value pairs.
const SET_IF_EXISTS = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV))
return 1
`;
