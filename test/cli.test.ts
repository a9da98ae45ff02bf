import { execFile } from 'node:child_process';
import { captureInternalError } from './helpers/log-capture.js';
import http from 'node:http';
import { mkdir, mkdtemp, readdir, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createRemoveBgHandler, type RemoveBgHandler } from '../src/core/index.js';
import { createExpressApp } from '../examples/express-app.js';
import { baseUrlOf } from './conformance/suite.js';
import { createTestKeys, TEST_PLANS, type TestKeys } from './helpers/fixtures.js';
import { objectOnTexture } from './helpers/synthetic-image.js';

const CLI = path.resolve('dist/src/cli/bgcut.js');

function bgcut(args: string[], env: Record<string, string>): Promise<{ code: number; stderr: string; stdout: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH!, ...env }, timeout: 120_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

describe('bgcut remove (batch CLI)', () => {
  let keys: TestKeys;
  let handler: RemoveBgHandler;
  let server: http.Server;
  let apiUrl: string;
  let work: string;
  let posts = 0;

  beforeAll(async () => {
    keys = await createTestKeys();
    handler = createRemoveBgHandler({
      keyStore: keys.store,
      plans: TEST_PLANS,
      // A deadline and one job image at a time for a loaded box: a slow inference is not what these tests are about.
      inference: { address: inject('inferenceAddress'), timeoutMs: 120_000 },
      jobs: { imageConcurrency: 1 },
      onInternalError: captureInternalError,
    });
    await handler.ready();
    const app = createExpressApp(handler, '/api');
    server = http.createServer((req, res) => {
      if (req.method === 'POST') posts++;
      app(req, res);
    });
    server.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    apiUrl = `${baseUrlOf(server)}/api`;
    work = await mkdtemp(path.join(os.tmpdir(), 'bgcut-cli-'));
    await mkdir(path.join(work, 'in/sub'), { recursive: true });
    const scene = await objectOnTexture(160, 120);
    await writeFile(path.join(work, 'in/a.jpg'), scene.bytes);
    await writeFile(path.join(work, 'in/sub/b.jpg'), scene.bytes);
    await writeFile(path.join(work, 'in/c.png'), await sharp(scene.bytes).png().toBuffer());
    await writeFile(path.join(work, 'in/not-an-image.jpg'), 'plain text, not an image\n'.repeat(20));
    await writeFile(path.join(work, 'in/notes.txt'), 'not picked up from a folder');
  });
  afterAll(async () => {
    server.closeAllConnections();
    server.close();
    await handler.close();
  });

  it('processes a folder (structure kept), reports failures by code, exits 1; a re-run resumes', async () => {
    const out = path.join(work, 'out');
    const env = { BGCUT_API_KEY: keys.good, BGCUT_API_URL: apiUrl };
    const first = await bgcut(['remove', path.join(work, 'in'), '--out', out, '--concurrency', '2', '--format', 'webp'], env);
    expect(first.code).toBe(1);
    expect(first.stderr).toContain('3 done, 1 failed');
    expect(first.stderr).toMatch(/unsupported_image_type x1: .*not-an-image\.jpg/);
    expect(first.stderr).toMatch(/4\/4/); // the progress line's done/total
    expect((await readdir(out, { recursive: true })).sort()).toEqual(['a.webp', 'c.webp', 'sub', 'sub/b.webp']);
    expect((await sharp(path.join(out, 'sub/b.webp')).metadata()).format).toBe('webp');
    expect(first.stderr + first.stdout).not.toContain(keys.good);

    const before = posts;
    const second = await bgcut(['remove', path.join(work, 'in'), '--out', out, '--format', 'webp'], env);
    expect(second.stderr).toContain('3 of 4 already done');
    expect(second.code).toBe(1);
    expect(posts - before).toBe(1); // only the failing file was sent again
  });

  it('--hints FILE: the strokes go with the image (keep: alpha 255 over the background; remove: 0 over the subject); refused with --job', async () => {
    const out = path.join(work, 'out-hints');
    // 160 x 120: the disc (centre 80, 66; radius 36) is the subject. White band along the top, black block in the middle.
    const marks = Buffer.alloc(160 * 120 * 4);
    for (let y = 0; y < 120; y++) {
      for (let x = 0; x < 160; x++) {
        if (y < 12) marks.set([255, 255, 255, 255], (y * 160 + x) * 4);
        else if (Math.abs(x - 80) <= 8 && Math.abs(y - 66) <= 8) marks.set([0, 0, 0, 255], (y * 160 + x) * 4);
      }
    }
    await writeFile(path.join(work, 'hints.png'), await sharp(marks, { raw: { width: 160, height: 120, channels: 4 } }).png().toBuffer());
    const env = { BGCUT_API_KEY: keys.good, BGCUT_API_URL: apiUrl };
    const done = await bgcut(['remove', path.join(work, 'in/a.jpg'), '--out', out, '--hints', path.join(work, 'hints.png')], env);
    expect(done.code, done.stderr).toBe(0);
    const { data } = await sharp(path.join(out, 'a.png')).extractChannel(3).raw().toBuffer({ resolveWithObject: true });
    expect([data[5 * 160 + 20], data[5 * 160 + 140], data[66 * 160 + 80], data[60 * 160 + 76]]).toEqual([255, 255, 0, 0]);
    const refused = await bgcut(['remove', path.join(work, 'in/a.jpg'), '--out', out, '--hints', path.join(work, 'hints.png'), '--job'], env);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('--hints is not taken by jobs');
    const missing = await bgcut(['remove', path.join(work, 'in/a.jpg'), '--out', out, '--hints', path.join(work, 'no-such.png')], env);
    expect(missing.stderr).toContain('--hints: no file');
  });

  it('--job: the folder as one server-side job (one POST), progress from its status, results written, failures by code', async () => {
    const out = path.join(work, 'out-job');
    const before = posts;
    const result = await bgcut(['remove', path.join(work, 'in'), '--out', out, '--job', '--format', 'webp'], { BGCUT_API_KEY: keys.good, BGCUT_API_URL: apiUrl });
    expect(posts - before).toBe(1);
    expect(result.stderr).toContain('3 done, 1 failed');
    expect(result.stderr).toMatch(/unsupported_image_type x1: .*not-an-image\.jpg/);
    expect(result.stderr).toMatch(/4\/4/);
    expect(result.code).toBe(1);
    expect((await readdir(out, { recursive: true })).sort()).toEqual(['a.webp', 'c.webp', 'sub', 'sub/b.webp']);
    expect((await sharp(path.join(out, 'a.webp')).metadata()).format).toBe('webp');
  }, 300_000);

  it('globs; exit 0 when everything succeeds', async () => {
    const out = path.join(work, 'out-glob');
    const result = await bgcut(['remove', `${work}/in/sub/*.jpg`, '--out', out], { BGCUT_API_KEY: keys.good, BGCUT_API_URL: apiUrl });
    expect(result.code).toBe(0);
    expect(await readdir(out)).toEqual(['b.png']);
    expect((await stat(path.join(out, 'b.png'))).size).toBeGreaterThan(0);
    const nothing = await bgcut(['remove', `${work}/in/*.bmp`, '--out', out], { BGCUT_API_KEY: keys.good, BGCUT_API_URL: apiUrl });
    expect(nothing.stderr).toContain('nothing matches');
    expect(nothing.code).toBe(1);
  });

  it('a refused key stops the batch at once instead of failing every file', async () => {
    const result = await bgcut(['remove', path.join(work, 'in'), '--out', path.join(work, 'out-bad'), '--concurrency', '1'], { BGCUT_API_KEY: keys.revoked, BGCUT_API_URL: apiUrl });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('stopped early');
    expect(result.stderr).toMatch(/revoked_api_key x1/);
  });

  it('the key only from BGCUT_API_KEY: a key flag is refused, exit 2', async () => {
    const flag = await bgcut(['remove', work, '--out', work, '--api-key', keys.good], { BGCUT_API_URL: apiUrl });
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain('BGCUT_API_KEY');
    expect(flag.stderr).not.toContain(keys.good);
    const none = await bgcut(['remove', work, '--out', work], { BGCUT_API_URL: apiUrl });
    expect(none.code).toBe(2);
  });
});
