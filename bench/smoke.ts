/**
 * npm run smoke -- <folder> [--expectations bench/smoke-expectations.json]
 *
 * Sends every file of the folder through POST /v1/remove-bg (Express adapter, real inference
 * server, default limits) and checks each answer against the expectations file: status, problem
 * code, and the output's size. Files with no expectation are sent too and must not get a 5xx.
 * Exits 1 on any mismatch.
 */
import { mkdtemp, readdir, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import sharp from 'sharp';
import { createExpressApp } from '../examples/express-app.js';
import { createRemoveBgHandler, FileKeyStore } from '../src/core/index.js';
import { startInferenceProcess } from '../test/helpers/inference-process.js';

interface Expectation {
  status: number;
  code?: string;
  width?: number;
  height?: number;
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { expectations: { type: 'string', default: fileURLToPath(new URL('../../bench/smoke-expectations.json', import.meta.url)) } },
});
const folder = positionals[0];
if (!folder) {
  console.error('usage: npm run smoke -- <folder> [--expectations file.json]');
  process.exit(2);
}
const expectations = JSON.parse(await readFile(values.expectations!, 'utf8')) as Record<string, Expectation>;

const inference = await startInferenceProcess();
const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-smoke-'));
const keyStore = new FileKeyStore({ file: path.join(dir, 'keys.json') });
const { key } = await keyStore.createKey({ accountId: 'smoke', plan: 'smoke' });
const handler = createRemoveBgHandler({
  keyStore,
  plans: { smoke: { requestsPerMinute: 10_000 } },
  inference: { address: inference.address },
  onInternalError: (error) => console.error(error),
});
await handler.ready();
const server = createExpressApp(handler).listen(0, '127.0.0.1');
await new Promise((r) => server.once('listening', r));
const { port } = server.address() as { port: number };

let failures = 0;
console.log('| file | expected | got | ms | |\n|---|---|---|---|---|');
try {
  const files = (await readdir(folder)).filter((f) => !/^MANIFEST|\.tsv$|\.md$/i.test(f)).sort();
  for (const file of files) {
    const bytes = await readFile(path.join(folder, file));
    const form = new FormData();
    form.append('file', new Blob([bytes]), file);
    const started = performance.now();
    const response = await fetch(`http://127.0.0.1:${port}/v1/remove-bg`, { method: 'POST', headers: { 'x-api-key': key }, body: form });
    const body = Buffer.from(await response.arrayBuffer());
    const ms = Math.round(performance.now() - started);
    let got = `${response.status}`;
    let size: { width?: number; height?: number } = {};
    if (response.status === 200) {
      const meta = await sharp(body).metadata();
      size = { width: meta.width, height: meta.height };
      got += ` ${meta.width}x${meta.height} ${meta.format} ${meta.channels}ch`;
    } else {
      got += ` ${(JSON.parse(body.toString()) as { code: string }).code}`;
    }
    const want = expectations[file];
    let ok: boolean;
    if (!want) ok = response.status < 500;
    else {
      ok =
        response.status === want.status &&
        (want.code === undefined || got.endsWith(` ${want.code}`)) &&
        (want.width === undefined || (size.width === want.width && size.height === want.height));
    }
    if (!ok) failures++;
    const expected = want ? `${want.status}${want.code ? ` ${want.code}` : ''}${want.width ? ` ${want.width}x${want.height}` : ''}` : '(none: not 5xx)';
    console.log(`| ${file} | ${expected} | ${got} | ${ms} | ${ok ? 'ok' : 'MISMATCH'} |`);
  }
  const missing = Object.keys(expectations).filter((f) => !files.includes(f));
  for (const file of missing) console.log(`| ${file} | present | missing from ${folder} | | note |`);
} finally {
  server.close();
  await handler.close();
  await inference.stop();
}
console.log(failures === 0 ? 'smoke: all files got their expected answers' : `smoke: ${failures} mismatch(es)`);
process.exit(failures === 0 ? 0 : 1);
