import type { ImageStatus, JobRecord, JobState } from './job.js';

/** What may change on a job after it is created. */
export interface JobPatch {
  state?: JobState;
  startedAt?: string;
  finishedAt?: string;
  expiresAt?: string;
}

/**
 * Where jobs live: MemoryJobStore for one instance, RedisJobStore for many. Each image's status
 * is written on its own, so two workers never overwrite each other's images.
 */
export interface JobStore {
  create(job: JobRecord): Promise<void>;
  /** The job, or undefined when unknown or forgotten. */
  get(id: string): Promise<JobRecord | undefined>;
  setImage(id: string, n: number, status: ImageStatus): Promise<void>;
  update(id: string, patch: JobPatch): Promise<void>;
  /** Keeps the record until `at` (ms since the epoch), then forgets it. */
  forgetAt(id: string, at: number): Promise<void>;
}

/** Jobs in this process's memory; a sweep forgets those past their time. */
export class MemoryJobStore implements JobStore {
  private readonly jobs = new Map<string, { job: JobRecord; forgetAt: number }>();

  constructor(private readonly now: () => number = Date.now) {}

  async create(job: JobRecord): Promise<void> {
    this.sweep();
    this.jobs.set(job.id, { job: structuredClone(job), forgetAt: Infinity });
  }

  async get(id: string): Promise<JobRecord | undefined> {
    const entry = this.jobs.get(id);
    if (!entry || entry.forgetAt <= this.now()) return undefined;
    return structuredClone(entry.job);
  }

  async setImage(id: string, n: number, status: ImageStatus): Promise<void> {
    const entry = this.jobs.get(id);
    if (entry && n >= 0 && n < entry.job.images.length) entry.job.images[n] = structuredClone(status);
  }

  async update(id: string, patch: JobPatch): Promise<void> {
    const entry = this.jobs.get(id);
    if (entry) Object.assign(entry.job, patch);
  }

  async forgetAt(id: string, at: number): Promise<void> {
    const entry = this.jobs.get(id);
    if (entry) entry.forgetAt = at;
  }

  private sweep(): void {
    const now = this.now();
    for (const [id, entry] of this.jobs) if (entry.forgetAt <= now) this.jobs.delete(id);
  }
}
