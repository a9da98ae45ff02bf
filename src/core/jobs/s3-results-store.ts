import type { S3Client, S3ClientConfig } from '@aws-sdk/client-s3';
import { lazyModule } from '../../util/lazy-module.js';
import { checkObjectName, type ResultsStore } from './results-store.js';

/** The S3 client package, loaded when a store is made (lazy-module.ts). */
const s3 = lazyModule<typeof import('@aws-sdk/client-s3')>('@aws-sdk/client-s3');

export interface S3ResultsStoreOptions {
  bucket: string;
  /** Key prefix of everything this store writes. Default `bgcut-jobs/`. */
  prefix?: string;
  /** An S3Client, or its config (region, endpoint, credentials, `forcePathStyle` for MinIO and the like). */
  client: S3Client | S3ClientConfig;
}

/**
 * Inputs and results on S3-compatible storage, so every instance reads what any wrote:
 * `<prefix>jobs/<job>/<name>`, and one marker per job, `<prefix>expiry/<job>/<ms>`, which the sweep
 * lists to find expired jobs (a bucket lifecycle rule on the prefix can back it up).
 */
export class S3ResultsStore implements ResultsStore {
  private readonly s3: S3Client;
  private readonly bucket: string;
  private readonly prefix: string;

  constructor(options: S3ResultsStoreOptions) {
    const { S3Client } = s3();
    this.s3 = options.client instanceof S3Client ? options.client : new S3Client(options.client);
    this.bucket = options.bucket;
    this.prefix = options.prefix ?? 'bgcut-jobs/';
  }

  async put(jobId: string, name: string, data: Buffer): Promise<void> {
    checkObjectName(jobId, name);
    await this.s3.send(new (s3().PutObjectCommand)({ Bucket: this.bucket, Key: this.key(jobId, name), Body: data }));
  }

  async get(jobId: string, name: string): Promise<Buffer | undefined> {
    checkObjectName(jobId, name);
    try {
      const object = await this.s3.send(new (s3().GetObjectCommand)({ Bucket: this.bucket, Key: this.key(jobId, name) }));
      return Buffer.from(await object.Body!.transformToByteArray());
    } catch (error) {
      if (error instanceof s3().NoSuchKey || (error as { name?: string }).name === 'NoSuchKey') return undefined;
      throw error;
    }
  }

  async delete(jobId: string, name: string): Promise<void> {
    checkObjectName(jobId, name);
    await this.deleteKeys([this.key(jobId, name)]);
  }

  async expireAt(jobId: string, at: number): Promise<void> {
    checkObjectName(jobId, 'expiry');
    const old = await this.list(`${this.prefix}expiry/${jobId}/`);
    await this.s3.send(new (s3().PutObjectCommand)({ Bucket: this.bucket, Key: `${this.prefix}expiry/${jobId}/${Math.round(at)}`, Body: '' }));
    await this.deleteKeys(old);
  }

  async sweep(now = Date.now()): Promise<number> {
    const markers = await this.list(`${this.prefix}expiry/`);
    let removed = 0;
    for (const marker of markers) {
      const [jobId, at] = marker.slice(`${this.prefix}expiry/`.length).split('/');
      if (!jobId || !(Number(at) <= now)) continue;
      await this.deleteKeys(await this.list(`${this.prefix}jobs/${jobId}/`));
      await this.deleteKeys([marker]);
      removed++;
    }
    return removed;
  }

  private key(jobId: string, name: string): string {
    return `${this.prefix}jobs/${jobId}/${name}`;
  }

  private async list(prefix: string): Promise<string[]> {
    const keys: string[] = [];
    let token: string | undefined;
    do {
      const page = await this.s3.send(new (s3().ListObjectsV2Command)({ Bucket: this.bucket, Prefix: prefix, ContinuationToken: token }));
      for (const object of page.Contents ?? []) if (object.Key) keys.push(object.Key);
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return keys;
  }

  private async deleteKeys(keys: string[]): Promise<void> {
    for (let i = 0; i < keys.length; i += 1000) {
      const batch = keys.slice(i, i + 1000);
      if (batch.length > 0) await this.s3.send(new (s3().DeleteObjectsCommand)({ Bucket: this.bucket, Delete: { Objects: batch.map((Key) => ({ Key })), Quiet: true } }));
    }
  }
}
