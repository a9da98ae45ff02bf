import { createHash } from 'node:crypto';
import { chmod, mkdtemp, open, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultCacheDir, resolveModelFile } from '../src/inference-server/model-source.js';

const sha256 = async (file: string) => createHash('sha256').update(await readFile(file)).digest('hex');

/** Overwrites bytes in the middle of a file, keeping its size: what a planted model looks like. */
async function tamper(file: string): Promise<void> {
  const handle = await open(file, 'r+');
  const { size } = await handle.stat();
  await handle.write(Buffer.from('planted by someone else'), 0, 23, Math.floor(size / 2));
  await handle.close();
}

describe('model cache', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-cache-test-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('defaults to a folder of this user, not the shared temp folder', () => {
    const saved = { cache: process.env.BGCUT_CACHE_DIR, xdg: process.env.XDG_CACHE_HOME };
    delete process.env.BGCUT_CACHE_DIR;
    delete process.env.XDG_CACHE_HOME;
    try {
      const folder = defaultCacheDir();
      expect(folder.startsWith(os.homedir())).toBe(true);
      expect(folder.startsWith(path.join(os.tmpdir(), 'bgcut'))).toBe(false);
      process.env.XDG_CACHE_HOME = '/somewhere/cache';
      expect(defaultCacheDir()).toBe(path.join('/somewhere/cache', 'bgcut', 'models'));
    } finally {
      if (saved.cache === undefined) delete process.env.BGCUT_CACHE_DIR;
      else process.env.BGCUT_CACHE_DIR = saved.cache;
      if (saved.xdg === undefined) delete process.env.XDG_CACHE_HOME;
      else process.env.XDG_CACHE_HOME = saved.xdg;
    }
  });

  it('never loads a cached assembly whose bytes were changed (same size): it is checked and rebuilt', async () => {
    const first = await resolveModelFile('isnet-fp16', { cacheDir: dir });
    const genuine = await sha256(first);
    expect((await stat(first)).mode & 0o077).toBe(0);
    await tamper(first);
    expect(await sha256(first)).not.toBe(genuine);
    const second = await resolveModelFile('isnet-fp16', { cacheDir: dir });
    expect(await sha256(second)).toBe(genuine);
  });

  it('never loads a cached prepared model whose bytes were changed: it is prepared again', async () => {
    const first = await resolveModelFile('isnet', { cacheDir: dir });
    const genuine = await sha256(first);
    await tamper(first);
    const second = await resolveModelFile('isnet', { cacheDir: dir });
    expect(await sha256(second)).toBe(genuine);
  });

  it('refuses a cache folder that other users can write to', async () => {
    const shared = await mkdtemp(path.join(os.tmpdir(), 'bgcut-cache-shared-'));
    try {
      await chmod(shared, 0o777);
      await expect(resolveModelFile('isnet-fp16', { cacheDir: shared })).rejects.toThrow(/other users could replace a model/);
    } finally {
      await rm(shared, { recursive: true, force: true });
    }
  });
});
