import { execFile } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { createRemoveBgHandler, FileKeyStore } from '../src/core/index.js';
import { recordIssuedKeys } from './helpers/log-capture.js';

const run = promisify(execFile);
const CLI = path.resolve('dist/src/cli/keys.js');
const tempFile = async () => path.join(await mkdtemp(path.join(os.tmpdir(), 'bgcut-ip-')), 'keys.json');

const BAD_ENTRIES = ['not-an-ip', '10.0.0.0/33', '10.0.0.0/', '10.0.0.0/8/8', '::1/129', '10.0.0.0/-1', '10.0.0.0/0x8', '300.1.1.1', ''];

describe('IP allow-lists are validated when a key is created', () => {
  it.each(BAD_ENTRIES)('the store API refuses %j and writes nothing', async (entry) => {
    const file = await tempFile();
    const store = new FileKeyStore({ file, reloadIntervalMs: 0 });
    await expect(store.createKey({ accountId: 'acct_ip', plan: 'free', allowedIps: [entry] })).rejects.toThrow(/not an IP address or CIDR range/);
    expect(await store.listKeys()).toEqual([]);
  });

  it('the store API takes addresses and ranges of both families', async () => {
    const store = new FileKeyStore({ file: await tempFile(), reloadIntervalMs: 0 });
    const { key, record } = await store.createKey({ accountId: 'acct_ip', plan: 'free', allowedIps: ['10.0.0.0/8', '192.0.2.7', '::1', '2001:db8::/32'] });
    recordIssuedKeys([key]);
    expect(record.allowedIps).toHaveLength(4);
  });

  it('bgcut-keys keys create --ip refuses a bad entry with a usage error (exit 2) and stores nothing', async () => {
    const file = await tempFile();
    const result = await run('node', [CLI, 'keys', 'create', '--file', file, '--account', 'acct_ip', '--plan', 'free', '--ip', '10.0.0.0/8', '--ip', 'office'])
      .then(() => ({ code: 0, stderr: '' }))
      .catch((error: { code: number; stderr: string }) => error);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('"office" is not an IP address or CIDR range');
    await expect(readFile(file)).rejects.toThrow(/ENOENT/);
  });
});

describe('a bad entry already stored', () => {
  it('answers 500 api_key_misconfigured (problem+json) and tells onInternalError which key, not a crash or internal_error', async () => {
    const file = await tempFile();
    const store = new FileKeyStore({ file, reloadIntervalMs: 0 });
    const { key, record } = await store.createKey({ accountId: 'acct_bad', plan: 'free', allowedIps: ['10.0.0.0/8'] });
    recordIssuedKeys([key]);
    // An entry written by an older version, or by hand: not one the store would accept now.
    const data = JSON.parse(await readFile(file, 'utf8'));
    data.keys[0].allowedIps = ['office-network'];
    await writeFile(file, JSON.stringify(data));

    const reported: unknown[] = [];
    const handler = createRemoveBgHandler({
      keyStore: new FileKeyStore({ file, reloadIntervalMs: 0 }),
      inference: { address: '127.0.0.1:1' },
      onInternalError: (error) => reported.push(error),
    });
    try {
      const response = await handler.handle({
        method: 'POST',
        url: '/v1/remove-bg',
        headers: { 'x-api-key': key },
        body: Readable.from([]),
        signal: new AbortController().signal,
        clientIp: '10.1.2.3',
      });
      expect(response.status).toBe(500);
      expect(response.headers['content-type']).toBe('application/problem+json');
      const body = JSON.parse(response.body.toString());
      expect(body.code).toBe('api_key_misconfigured');
      expect(body.detail).not.toContain('office-network');
      expect(reported).toHaveLength(1);
      expect(String((reported[0] as Error).message)).toContain(record.id);
      expect(String((reported[0] as Error).message)).toContain('"office-network"');
      expect(String((reported[0] as Error).message)).not.toContain(key);
    } finally {
      await handler.close();
    }
  });
});
