import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import writeFileAtomic from 'write-file-atomic';

/**
 * Where a job's inputs (until they are done) and results are kept: the local filesystem by
 * default (LocalResultsStore), S3-compatible storage for many instances (S3ResultsStore). Objects
 * are grouped by job; each job has an expiry, after which `sweep` removes it.
 */
export interface ResultsStore {
  put(jobId: string, name: string, data: Buffer): Promise<void>;
  /** The object, or undefined when it is not there (never written, deleted or swept). */
  get(jobId: string, name: string): Promise<Buffer | undefined>;
  delete(jobId: string, name: string): Promise<void>;
  /** After `at` (ms since the epoch) the job's objects are removed by the next sweep. */
  expireAt(jobId: string, at: number): Promise<void>;
  /** Removes every job past its expiry; resolves with how many were removed. */
  sweep(now?: number): Promise<number>;
}

/** Job ids and object names are made by the API (UUIDs, `in-3`, `out-3`): anything else is a bug. */
const SAFE_NAME = /^[A-Za-z0-9_-]{1,100}$/;

export function checkObjectName(jobId: string, name: string): void {
  if (!SAFE_NAME.test(jobId) || !SAFE_NAME.test(name)) throw new RangeError(`results store: unsafe object name ${JSON.stringify(`${jobId}/${name}`)}`);
}

/**
 * One folder per job below `dir`, each with an `expires` file (ms since the epoch) once the job
 * has ended. Only this instance can read it: with several instances use S3ResultsStore.
 */
export class LocalResultsStore implements ResultsStore {
  constructor(private readonly dir: string) {}

  async put(jobId: string, name: string, data: Buffer): Promise<void> {
    checkObjectName(jobId, name);
    await mkdir(path.join(this.dir, jobId), { recursive: true });
    await writeFileAtomic(path.join(this.dir, jobId, name), data);
  }

  async get(jobId: string, name: string): Promise<Buffer | undefined> {
    checkObjectName(jobId, name);
    return readFile(path.join(this.dir, jobId, name)).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return undefined;
      throw error;
    });
  }

  async delete(jobId: string, name: string): Promise<void> {
    checkObjectName(jobId, name);
    await rm(path.join(this.dir, jobId, name), { force: true });
  }

  async expireAt(jobId: string, at: number): Promise<void> {
    checkObjectName(jobId, 'expires');
    await mkdir(path.join(this.dir, jobId), { recursive: true });
    await writeFile(path.join(this.dir, jobId, '.expires'), String(Math.round(at)));
  }

  async sweep(now = Date.now()): Promise<number> {
    const jobs = await readdir(this.dir).catch(() => [] as string[]);
    let removed = 0;
    for (const jobId of jobs) {
      if (!SAFE_NAME.test(jobId)) continue;
      const at = Number(await readFile(path.join(this.dir, jobId, '.expires'), 'utf8').catch(() => 'NaN'));
      if (at <= now) {
        await rm(path.join(this.dir, jobId), { recursive: true, force: true });
        removed++;
      }
    }
    return removed;
  }
}
