import { LRUCache } from 'lru-cache';

/** A response kept to answer retries of the request that made it. */
export interface StoredResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/**
 * What a claim of an Idempotency-Key found:
 * - `claimed`: nobody had it; the caller runs the request and then completes or abandons it;
 * - `in-progress`: a request with this key is running now;
 * - `done`: a request with this key was completed (and charged); `result` is its response while
 *   it is kept (shorter than the key itself), undefined once it is not.
 * `fingerprint` is that of the request that holds the key.
 */
export type Claim =
  | { state: 'claimed'; token: string }
  | { state: 'in-progress'; fingerprint: string }
  | { state: 'done'; fingerprint: string; result: StoredResponse | undefined };

export interface IdempotencyTimes {
  /** How long a completed key is remembered (retries within it are not charged again). */
  keyTtlMs: number;
  /** How long a completed request's response is kept to be answered again (at most keyTtlMs). */
  resultTtlMs: number;
  /** How long a claim lasts without completion (an instance that died holding it). */
  inProgressTtlMs: number;
}

/** Where Idempotency-Keys and their results live: memory (one instance) or Redis (shared). */
export interface IdempotencyStore {
  /** Claims `key` for a request with `fingerprint`, in one step: two requests cannot both claim it. */
  claim(key: string, fingerprint: string, token: string, times: IdempotencyTimes): Promise<Claim>;
  /** Marks the claim done, keeping `result` (undefined: too large to keep). Nothing if the claim is not `token`'s. */
  complete(key: string, token: string, result: StoredResponse | undefined, times: IdempotencyTimes): Promise<void>;
  /** Gives the claim up (the request failed and charged nothing): a retry runs afresh. Nothing if it is not `token`'s. */
  abandon(key: string, token: string): Promise<void>;
}

interface MemoryRecord {
  state: 'in-progress' | 'done';
  fingerprint: string;
  token: string;
}

export interface MemoryIdempotencyOptions {
  /** Most keys remembered; past it the least recently used is forgotten (and a retry of it charged again). Default 100 000. */
  maxKeys?: number;
  /** Most bytes of responses kept; past it the least recently used response is dropped (its key still answers 409). Default 256 MiB. */
  maxBytes?: number;
}

/** One instance's keys in memory: both maps are LRUs bounded by count and by bytes. */
export class MemoryIdempotencyStore implements IdempotencyStore {
  private readonly records: LRUCache<string, MemoryRecord>;
  private readonly results: LRUCache<string, StoredResponse>;

  constructor(options: MemoryIdempotencyOptions = {}) {
    this.records = new LRUCache({ max: options.maxKeys ?? 100_000 });
    this.results = new LRUCache({
      maxSize: options.maxBytes ?? 256 * 1024 * 1024,
      // Headers and bookkeeping counted at a flat 1 KiB.
      sizeCalculation: (result) => result.body.length + 1024,
    });
  }

  async claim(key: string, fingerprint: string, token: string, times: IdempotencyTimes): Promise<Claim> {
    const record = this.records.get(key);
    if (!record) {
      this.records.set(key, { state: 'in-progress', fingerprint, token }, { ttl: times.inProgressTtlMs });
      return { state: 'claimed', token };
    }
    if (record.state === 'in-progress') return { state: 'in-progress', fingerprint: record.fingerprint };
    return { state: 'done', fingerprint: record.fingerprint, result: this.results.get(key) };
  }

  async complete(key: string, token: string, result: StoredResponse | undefined, times: IdempotencyTimes): Promise<void> {
    const record = this.records.get(key);
    if (!record || record.token !== token) return;
    this.records.set(key, { ...record, state: 'done' }, { ttl: times.keyTtlMs });
    if (result) this.results.set(key, result, { ttl: times.resultTtlMs });
  }

  async abandon(key: string, token: string): Promise<void> {
    if (this.records.get(key)?.token === token) this.records.delete(key);
  }
}
