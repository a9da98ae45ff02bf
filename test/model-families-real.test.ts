import { createAdaptorServer } from '@hono/node-server';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import type { Server } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFetchHandler } from '../src/adapters/fetch.js';
import { createRemoveBgHandler, FileKeyStore, modelProfile, type RemoveBgHandler } from '../src/core/index.js';
import { KNOWN_MODELS } from '../src/models/known-models.js';
import { toFloat32Bytes } from '../src/inference-server/float32-model.js';
import { resolveModelFile } from '../src/inference-server/model-source.js';
import { baseUrlOf } from './conformance/suite.js';
import { startInferenceProcess, type InferenceProcess } from './helpers/inference-process.js';
import { captureInternalError, recordIssuedKeys } from './helpers/log-capture.js';
import { alphaIoU, decodeAlpha, objectOnTexture } from './helpers/synthetic-image.js';

// Real weights. BGCUT_TEST_MODEL_DIR may name a folder of rembg model files (a copy of
// ~/.u2net); every known model with a file there is served from it and must cut the synthetic
// object out. ISNet always runs: when the folder has no isnet-general-use.onnx, the ISNet weights
// bgcut ships (@imgly/background-removal-data, widened to FP32 as rembg's export is) are written
// under rembg's file name for it. No model is ever downloaded; the output says which families
// were skipped and why.
const modelDir = process.env.BGCUT_TEST_MODEL_DIR;
const inFolder = (m: (typeof KNOWN_MODELS)[string]) => (modelDir ? m.fileNames.find((f) => existsSync(path.join(modelDir, f))) : undefined);
const SHIPPED = 'isnet-general-use';
const present = Object.values(KNOWN_MODELS)
  .filter((m) => inFolder(m) || m.name === SHIPPED)
  .map((m) => m.name);
const skipped = Object.values(KNOWN_MODELS)
  .filter((m) => !present.includes(m.name))
  .map((m) => ({
    name: m.name,
    why: modelDir ? `no ${m.fileNames.join(' or ')} in BGCUT_TEST_MODEL_DIR=${modelDir}` : `BGCUT_TEST_MODEL_DIR is not set (its weights are not shipped: ${m.download})`,
  }));
const families = (names: string[]) => [...new Set(names.map((n) => KNOWN_MODELS[n]!.family))];
console.log(
  `real model files: running ${present.join(', ')} (families ${families(present).join(', ')}); ` +
    `families with no real file, skipped: ${families(skipped.map((s) => s.name)).filter((f) => !families(present).includes(f)).join(', ') || 'none'}\n` +
    skipped.map((s) => `  skipped ${s.name} (${KNOWN_MODELS[s.name]!.family}): ${s.why}`).join('\n'),
);

describe('real model files (the shipped ISNet as isnet-general-use.onnx, and BGCUT_TEST_MODEL_DIR\'s)', () => {
  let dir: string;
  let server: InferenceProcess;
  let handler: RemoveBgHandler;
  let http: Server;
  let key: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-real-models-'));
    // A rembg-style folder: the user's files linked in, and ISNet from the shipped weights unless the folder has rembg's.
    const home = path.join(dir, 'u2net-home');
    await mkdir(home);
    for (const name of present) {
      const file = inFolder(KNOWN_MODELS[name]!);
      if (file) await symlink(path.join(modelDir!, file), path.join(home, file));
    }
    if (!inFolder(KNOWN_MODELS[SHIPPED]!)) {
      const shipped = await readFile(await resolveModelFile('isnet-fp16'));
      await writeFile(path.join(home, KNOWN_MODELS[SHIPPED]!.fileNames[0]!), toFloat32Bytes(shipped));
    }
    server = await startInferenceProcess(present.flatMap((name) => ['--model', name]), { U2NET_HOME: home, BGCUT_CACHE_DIR: path.join(dir, 'cache') });
    const store = new FileKeyStore({ file: path.join(dir, 'keys.json'), reloadIntervalMs: 0 });
    key = (await store.createKey({ accountId: 'acct_real', plan: 'roomy' })).key;
    recordIssuedKeys([key]);
    const prepared = (name: string) => !new RegExp(`model ${name}: served as published`).test(server.output());
    handler = createRemoveBgHandler({
      keyStore: store,
      plans: { roomy: { requestsPerMinute: 1000 } },
      inference: { address: server.address, models: Object.fromEntries(present.map((name) => [name, modelProfile(name, { prepared: prepared(name) })])), modelName: present[0]!, timeoutMs: 120_000 },
      onInternalError: captureInternalError,
    });
    await handler.ready();
    http = createAdaptorServer({ fetch: createFetchHandler(handler) }) as Server;
    http.listen(0, '127.0.0.1');
    await new Promise((resolve) => http.once('listening', resolve));
  }, 600_000);

  afterAll(async () => {
    http?.closeAllConnections();
    await new Promise((resolve) => http?.close(resolve));
    await handler?.close();
    await server?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it.each(present)('%s cuts the object out (alpha IoU > 0.8 against the truth)', async (name) => {
    const image = await objectOnTexture(640, 480);
    const form = new FormData();
    form.append('file', new Blob([image.bytes], { type: 'image/jpeg' }), 'photo.jpg');
    const response = await fetch(`${baseUrlOf(http)}/v1/remove-bg?model=${name}&format=png`, { method: 'POST', headers: { 'x-api-key': key }, body: form });
    expect(response.status).toBe(200);
    const { alpha } = await decodeAlpha(Buffer.from(await response.arrayBuffer()));
    const iou = alphaIoU(alpha, image.truth);
    console.log(`real model ${name}: alpha IoU ${iou.toFixed(4)}`);
    expect(iou).toBeGreaterThan(0.8);
  }, 300_000);
});

describe('real model files not run here', () => {
  it.skip.each(skipped.length > 0 ? skipped.map((s) => `${s.name}: ${s.why}`) : ['(none)'])('skipped %s', () => {});
});
