import { createAdaptorServer } from '@hono/node-server';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import type { Server } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFetchHandler } from '../src/adapters/fetch.js';
import { createRemoveBgHandler, FileKeyStore, modelProfile, type RemoveBgHandler } from '../src/core/index.js';
import { KNOWN_MODELS } from '../src/models/known-models.js';
import { baseUrlOf } from './conformance/suite.js';
import { startInferenceProcess, type InferenceProcess } from './helpers/inference-process.js';
import { captureInternalError, recordIssuedKeys } from './helpers/log-capture.js';
import { alphaIoU, decodeAlpha, objectOnTexture } from './helpers/synthetic-image.js';

// Real weights, when there are some: BGCUT_TEST_MODEL_DIR is a folder of rembg model files
// (a copy of ~/.u2net); every known model with a file there is served from it and must cut the
// synthetic object out. No model is ever downloaded: without the folder this is skipped.
const modelDir = process.env.BGCUT_TEST_MODEL_DIR;
const present = modelDir ? Object.values(KNOWN_MODELS).filter((m) => m.fileNames.some((f) => existsSync(path.join(modelDir, f)))).map((m) => m.name) : [];

describe.skipIf(!modelDir)('real model files from BGCUT_TEST_MODEL_DIR', () => {
  let dir: string;
  let server: InferenceProcess;
  let handler: RemoveBgHandler;
  let http: Server;
  let key: string;

  beforeAll(async () => {
    if (present.length === 0) throw new Error(`BGCUT_TEST_MODEL_DIR=${modelDir} holds none of: ${Object.values(KNOWN_MODELS).flatMap((m) => m.fileNames).join(', ')}`);
    dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-real-models-'));
    server = await startInferenceProcess(present.flatMap((name) => ['--model', name]), { U2NET_HOME: modelDir!, BGCUT_CACHE_DIR: path.join(dir, 'cache') });
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

  it.each(present.length > 0 ? present : ['(none)'])('%s cuts the object out (alpha IoU > 0.8 against the truth)', async (name) => {
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

describe.skipIf(modelDir)('real model files', () => {
  it.skip('skipped: BGCUT_TEST_MODEL_DIR is not set (point it at a folder of rembg model files, e.g. a copy of ~/.u2net)', () => {});
});
