import { createHash } from 'node:crypto';
import { chmod, mkdtemp, open, readdir, readFile, rm, stat, truncate, writeFile } from 'node:fs/promises';
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

async function onlyFile(dir: string, pattern: RegExp): Promise<string> {
  const found = (await readdir(dir)).filter((f) => pattern.test(f));
  if (found.length !== 1) throw new Error(`expected one file like ${pattern} in ${dir}, found ${found.join(', ') || 'none'}`);
  return path.join(dir, found[0]!);
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
   }, 300_000);

  it('never loads a cached prepared model whose bytes were changed: it is prepared again', async () => {
    const first = await resolveModelFile('isnet', { cacheDir: dir });
    const genuine = await sha256(first);
    await tamper(first);
    const second = await resolveModelFile('isnet', { cacheDir: dir });
    expect(await sha256(second)).toBe(genuine);
   }, 300_000);

  it('uses a cached prepared model that matches its record without preparing it again (its source is not even read)', async () => {
    const first = await resolveModelFile('isnet', { cacheDir: dir });
    const genuine = await sha256(first);
    const record = JSON.parse(await readFile(`${first}.json`, 'utf8')) as { sha256: string; size: number; inputs: string[] };
    expect(record.sha256).toBe(genuine);
    expect(record.size).toBe((await stat(first)).size);
    // Preparing needs the assembled source; without it here, a second preparation would assemble it again.
    const source = await onlyFile(dir, /^isnet-fp16-.*\.onnx$/);
    await rm(source);
    const again = await resolveModelFile('isnet', { cacheDir: dir });
    expect(again).toBe(first);
    expect(await sha256(again)).toBe(genuine);
    expect(await stat(source).then(() => true, () => false)).toBe(false);
  }, 300_000);

  it('prepares again when the record names other inputs (a new recipe, table or preparation code), and records these', async () => {
    const first = await resolveModelFile('isnet', { cacheDir: dir });
    const genuine = await sha256(first);
    const record = JSON.parse(await readFile(`${first}.json`, 'utf8')) as { sha256: string; size: number; inputs: string[] };
    const stale = { ...record, inputs: ['made-by-another-recipe'] };
    await writeFile(`${first}.json`, JSON.stringify(stale));
    const source = await onlyFile(dir, /^isnet-fp16-.*\.onnx$/).catch(() => undefined);
    if (source) await rm(source);
    const again = await resolveModelFile('isnet', { cacheDir: dir });
    expect(await sha256(again)).toBe(genuine);
    // It was prepared: the source was assembled for it.
    expect((await readdir(dir)).some((f) => /^isnet-fp16-.*\.onnx$/.test(f))).toBe(true);
    const rewritten = JSON.parse(await readFile(`${again}.json`, 'utf8')) as { inputs: string[] };
    // The same bytes from other inputs are kept as another accepted key, so two builds sharing the cache do not flip.
    expect(rewritten.inputs).toEqual([record.inputs[0], 'made-by-another-recipe']);
  }, 300_000);

  it('prepares again when the cached file is cut short or its record is missing', async () => {
    const first = await resolveModelFile('isnet', { cacheDir: dir });
    const genuine = await sha256(first);
    await truncate(first, 1000);
    expect(await sha256(await resolveModelFile('isnet', { cacheDir: dir }))).toBe(genuine);
    await tamper(first);
    await rm(`${first}.json`);
    expect(await sha256(await resolveModelFile('isnet', { cacheDir: dir }))).toBe(genuine);
    expect(JSON.parse(await readFile(`${first}.json`, 'utf8')).sha256).toBe(genuine);
  }, 300_000);

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
