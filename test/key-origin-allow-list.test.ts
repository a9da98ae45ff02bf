import { execFile } from 'node:child_process';
import { mkdtemp, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { FileKeyStore } from '../src/core/index.js';
import { recordIssuedKeys } from './helpers/log-capture.js';

const run = promisify(execFile);
const CLI = path.resolve('dist/src/cli/keys.js');
const tempFile = async () => path.join(await mkdtemp(path.join(os.tmpdir(), 'bgcut-origin-')), 'keys.json');

describe('origin allow-lists are validated when a key is created', () => {
  // The Origin header is compared by string: these could never match a browser's.
  const BAD_ORIGINS = ['https://shop.example/', 'https://shop.example/path', 'HTTPS://shop.example', 'shop.example', 'ftp://shop.example', '*', 'null', ''];

  it.each(BAD_ORIGINS)('the store API refuses %j and writes nothing', async (entry) => {
    const store = new FileKeyStore({ file: await tempFile(), reloadIntervalMs: 0 });
    await expect(store.createKey({ accountId: 'acct_origin', plan: 'free', allowedOrigins: [entry] })).rejects.toThrow(/is not an origin/);
    expect(await store.listKeys()).toEqual([]);
  });

  it('the store API takes http and https origins, with a port', async () => {
    const store = new FileKeyStore({ file: await tempFile(), reloadIntervalMs: 0 });
    const { key, record } = await store.createKey({ accountId: 'acct_origin', plan: 'free', allowedOrigins: ['https://shop.example', 'http://localhost:8080'] });
    recordIssuedKeys([key]);
    expect(record.allowedOrigins).toEqual(['https://shop.example', 'http://localhost:8080']);
  });

  it('bgcut-keys keys create --origin refuses a bad entry with a usage error (exit 2) and stores nothing', async () => {
    const file = await tempFile();
    const result = await run('node', [CLI, 'keys', 'create', '--file', file, '--account', 'acct_origin', '--plan', 'free', '--origin', 'https://shop.example/'])
      .then(() => ({ code: 0, stderr: '' }))
      .catch((error: { code: number; stderr: string }) => error);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('"https://shop.example/" is not an origin');
    await expect(readFile(file)).rejects.toThrow(/ENOENT/);
  });
});
