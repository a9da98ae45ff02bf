import { mkdtemp } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import S3rver from 's3rver';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalResultsStore, S3ResultsStore, type ResultsStore } from '../src/core/index.js';

// The same contract for both stores; S3 against a real S3-compatible server (s3rver) on loopback.
let s3rver: S3rver;
let endpoint: string;
beforeAll(async () => {
  const directory = await mkdtemp(path.join(os.tmpdir(), 'bgcut-s3rver-'));
  s3rver = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory, configureBuckets: [{ name: 'results', configs: [] }] });
  const address = (await s3rver.run()) as AddressInfo;
  endpoint = `http://127.0.0.1:${address.port}`;
});
afterAll(async () => {
  await s3rver?.close();
});

const stores: Record<string, () => Promise<ResultsStore>> = {
  local: async () => new LocalResultsStore(await mkdtemp(path.join(os.tmpdir(), 'bgcut-results-'))),
  s3: async () =>
    new S3ResultsStore({
      bucket: 'results',
      prefix: `t${Math.random().toString(16).slice(2)}/`,
      client: { endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' } },
    }),
};

describe.each(Object.keys(stores))('%s results store', (kind) => {
  it('keeps what it was given until its job expires; the sweep removes expired jobs only', async () => {
    const store = await stores[kind]!();
    const bytes = Buffer.from([0, 1, 2, 3, 255]);
    await store.put('job-a', 'out-0', bytes);
    await store.put('job-a', 'out-1', Buffer.from('second'));
    await store.put('job-b', 'out-0', Buffer.from('other job'));
    expect(await store.get('job-a', 'out-0')).toEqual(bytes);
    expect(await store.get('job-a', 'missing')).toBeUndefined();
    await store.delete('job-a', 'out-1');
    expect(await store.get('job-a', 'out-1')).toBeUndefined();

    await store.expireAt('job-a', 1_000);
    await store.expireAt('job-b', 5_000);
    expect(await store.sweep(2_000)).toBe(1);
    expect(await store.get('job-a', 'out-0')).toBeUndefined();
    expect(await store.get('job-b', 'out-0')).toEqual(Buffer.from('other job'));
    // A later expiry replaces the earlier one.
    await store.expireAt('job-b', 9_000);
    expect(await store.sweep(6_000)).toBe(0);
    expect(await store.sweep(9_000)).toBe(1);
    expect(await store.get('job-b', 'out-0')).toBeUndefined();
  });

  it('refuses object names it did not make (no path tricks)', async () => {
    const store = await stores[kind]!();
    await expect(store.put('../x', 'out-0', Buffer.from('x'))).rejects.toThrow(RangeError);
    await expect(store.get('job', '../../etc/passwd')).rejects.toThrow(RangeError);
  });
});
