import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { FileKeyStore, generateApiKey, type Plans } from '../../src/core/index.js';
import { recordIssuedKeys } from './log-capture.js';

export const TEST_PLANS: Plans = {
  roomy: { requestsPerMinute: 1000 },
  tiny: { requestsPerMinute: 3 },
  small_images: { requestsPerMinute: 1000, maxInputMegapixels: 0.1 },
  one_image: { requestsPerMinute: 1000, monthlyQuota: { unit: 'images', amount: 1 } },
  one_at_a_time: { requestsPerMinute: 1000, maxConcurrent: 1 },
  format_only: { requestsPerMinute: 1000, outputOptions: ['format'], maxOutputMegapixels: 0.05 },
};

export interface TestKeys {
  store: FileKeyStore;
  file: string;
  good: string;
  tiny: string;
  expired: string;
  revoked: string;
  suspended: string;
  /** Well-formed (prefix, length, checksum) but never issued. */
  unknown: string;
  /** Only usable from 10.0.0.0/8. */
  ipLocked: string;
  /** Only usable from https://shop.example. */
  originLocked: string;
  smallImages: string;
  oneImage: string;
  oneAtATime: string;
  /** Plan with only the `format` option and at most 0.05 MP of output. */
  formatOnly: string;
}

/** A fresh key file with one key for each case the suites need. */
export async function createTestKeys(): Promise<TestKeys> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-keys-'));
  const file = path.join(dir, 'keys.json');
  const store = new FileKeyStore({ file, reloadIntervalMs: 0 });
  const good = (await store.createKey({ accountId: 'acct_good', plan: 'roomy' })).key;
  const tiny = (await store.createKey({ accountId: 'acct_tiny', plan: 'tiny' })).key;
  const expired = (await store.createKey({ accountId: 'acct_expired', plan: 'roomy', expiresAt: new Date(Date.now() - 1000) })).key;
  const revoked = (await store.createKey({ accountId: 'acct_revoked', plan: 'roomy' })).key;
  await store.createKey({ accountId: 'acct_revoked', plan: 'roomy', revokeOthers: true });
  const suspended = (await store.createKey({ accountId: 'acct_suspended', plan: 'roomy' })).key;
  await store.update((data) => {
    data.accounts.find((a) => a.id === 'acct_suspended')!.status = 'suspended';
  });
  const ipLocked = (await store.createKey({ accountId: 'acct_ip', plan: 'roomy', allowedIps: ['10.0.0.0/8'] })).key;
  const originLocked = (await store.createKey({ accountId: 'acct_origin', plan: 'roomy', allowedOrigins: ['https://shop.example'] })).key;
  const smallImages = (await store.createKey({ accountId: 'acct_small', plan: 'small_images' })).key;
  const oneImage = (await store.createKey({ accountId: 'acct_one', plan: 'one_image' })).key;
  const oneAtATime = (await store.createKey({ accountId: 'acct_serial', plan: 'one_at_a_time' })).key;
  const formatOnly = (await store.createKey({ accountId: 'acct_format', plan: 'format_only' })).key;
  const keys = { store, file, good, tiny, expired, revoked, suspended, unknown: generateApiKey(), ipLocked, originLocked, smallImages, oneImage, oneAtATime, formatOnly };
  recordIssuedKeys(Object.values(keys).filter((v): v is string => typeof v === 'string' && v.startsWith('bgk_')));
  return keys;
}

/** A multipart/form-data body built by hand, for cases FormData cannot express. */
export function multipartBody(parts: { name: string; filename?: string; type?: string; data: Buffer | string }[]) {
  const boundary = `----bgcut${Math.random().toString(16).slice(2)}`;
  const chunks: Buffer[] = [];
  for (const part of parts) {
    const disposition = `form-data; name="${part.name}"${part.filename !== undefined ? `; filename="${part.filename}"` : ''}`;
    const head = `--${boundary}\r\nContent-Disposition: ${disposition}\r\n${part.type ? `Content-Type: ${part.type}\r\n` : ''}\r\n`;
    chunks.push(Buffer.from(head), Buffer.isBuffer(part.data) ? part.data : Buffer.from(part.data), Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}
