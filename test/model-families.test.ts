import { createAdaptorServer } from '@hono/node-server';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { Server } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFetchHandler } from '../src/adapters/fetch.js';
import { createRemoveBgHandler, FileKeyStore, modelProfile, type PreprocessingProfile, type RemoveBgHandler } from '../src/core/index.js';
import { InferenceClient } from '../src/core/inference/inference-client.js';
import { FAMILIES } from '../src/models/families.js';
import { KNOWN_MODELS, normalisationOf } from '../src/models/known-models.js';
import { baseUrlOf } from './conformance/suite.js';
import { expectedAlpha, familyGraph, testCard } from './helpers/family-graphs.js';
import { startInferenceProcess, type InferenceProcess } from './helpers/inference-process.js';
import { captureInternalError, recordIssuedKeys } from './helpers/log-capture.js';
import { OpenApiResponseChecker } from './helpers/openapi-check.js';
import { decodeAlpha } from './helpers/synthetic-image.js';

const CLI = fileURLToPath(new URL('../dist/src/inference-server/cli.js', import.meta.url));
const NAMES = Object.keys(KNOWN_MODELS);
/** Some files lie under the name they are published under rather than rembg's NAME.onnx: both are found. */
const PUBLISHED_NAME = new Set(['birefnet-general', 'bria-rmbg', 'ben2']);

/**
 * What rembg feeds each model and does with what comes out, written here from rembg's session
 * files (github.com/danielgatis/rembg, commit 684f8e9, rembg/sessions/*.py: `self.normalize(img,
 * mean, std, (size, size))` after `img.convert("RGB")`, then `ort_outs[0][:, 0, :, :]`, through
 * `self.sigmoid` for BiRefNet only) and the models' papers/code (U²-Net, IS-Net and BEN2 end in a
 * sigmoid; BiRefNet's export ends in logits). Not read from the code under test: FAMILIES is
 * checked against it, the synthetic graphs are built from it and the expected alpha computed from it.
 */
type Row = { session: string; size: number; mean: number[]; std: number[]; channels: 'RGB' | 'BGR'; output: 'probability' | 'logits'; outputIndex: number };
const IMAGENET_MEAN = [0.485, 0.456, 0.406];
const IMAGENET_STD = [0.229, 0.224, 0.225];
const u2netRow = (session: string): Row => ({ session, size: 320, mean: IMAGENET_MEAN, std: IMAGENET_STD, channels: 'RGB', output: 'probability', outputIndex: 0 });
const birefnetRow = (session: string): Row => ({ session, size: 1024, mean: IMAGENET_MEAN, std: IMAGENET_STD, channels: 'RGB', output: 'logits', outputIndex: 0 });
const REMBG: Record<string, Row> = {
  u2net: u2netRow('u2net.py'),
  u2netp: u2netRow('u2netp.py'),
  u2net_human_seg: u2netRow('u2net_human_seg.py'),
  silueta: u2netRow('silueta.py'),
  'isnet-general-use': { session: 'dis_general_use.py', size: 1024, mean: [0.5, 0.5, 0.5], std: [1, 1, 1], channels: 'RGB', output: 'probability', outputIndex: 0 },
  'isnet-anime': { session: 'dis_anime.py', size: 1024, mean: IMAGENET_MEAN, std: [1, 1, 1], channels: 'RGB', output: 'probability', outputIndex: 0 },
  'birefnet-general': birefnetRow('birefnet_general.py'),
  'birefnet-general-lite': birefnetRow('birefnet_general_lite.py (subclass of birefnet_general)'),
  'birefnet-portrait': birefnetRow('birefnet_portrait.py (subclass)'),
  'birefnet-massive': birefnetRow('birefnet_massive.py (subclass)'),
  'birefnet-hrsod': birefnetRow('birefnet_hrsod.py (subclass)'),
  'birefnet-dis': birefnetRow('birefnet_dis.py (subclass)'),
  'birefnet-cod': birefnetRow('birefnet_cod.py (subclass)'),
  'bria-rmbg': { session: 'bria_rmbg.py', size: 1024, mean: IMAGENET_MEAN, std: IMAGENET_STD, channels: 'RGB', output: 'probability', outputIndex: 0 },
  ben2: { session: 'ben_custom.py', size: 1024, mean: [0.5, 0.5, 0.5], std: [1, 1, 1], channels: 'RGB', output: 'probability', outputIndex: 0 },
};

/** The card's pixels in the order the table says the model takes them. */
const inOrder = (rgb: Buffer, channels: Row['channels']) => {
  if (channels === 'RGB') return rgb;
  const swapped = Buffer.from(rgb);
  for (let i = 0; i < swapped.length; i += 3) [swapped[i], swapped[i + 2]] = [rgb[i + 2]!, rgb[i]!];
  return swapped;
};

describe('the model families agree with rembg\'s sessions (a table written from rembg/sessions/*.py)', () => {
  it('the table covers every known model and nothing else', () => {
    expect(Object.keys(REMBG).sort()).toEqual([...NAMES].sort());
  });
  it.each(NAMES)('%s: size, mean, std, channel order, output kind and output index as rembg has them', (name) => {
    const known = KNOWN_MODELS[name]!;
    const row = REMBG[name]!;
    const family = FAMILIES[known.family];
    const normalisation = normalisationOf(known);
    expect({ size: family.size, mean: normalisation.mean, std: normalisation.std, channels: normalisation.channelOrder, output: family.output }).toEqual({
      size: row.size,
      mean: row.mean,
      std: row.std,
      channels: row.channels,
      output: row.output,
    });
    // rembg reads ort_outs[0]: the mask is the first output, which is what FAMILIES documents (no index field to compare).
    expect(row.outputIndex).toBe(0);
    expect(family.outputs.min).toBeGreaterThanOrEqual(1);
  });
});

// Every known model as a synthetic graph with its family's published signature, in a
// rembg-style folder ($U2NET_HOME), served together by one inference server, each cut out
// through HTTP with `model=`. A file that cannot be prepared (opset 10) is served as published.
describe('model families through HTTP (synthetic graphs with each family\'s signature)', () => {
  let dir: string;
  let server: InferenceProcess;
  let handler: RemoveBgHandler;
  let http: Server;
  let base: string;
  let roomy: string;
  let onlyU2net: string;
  const profiles: Record<string, PreprocessingProfile> = {};

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-families-'));
    const u2netHome = path.join(dir, 'u2net-home');
    await mkdir(u2netHome);
    for (const name of NAMES) {
      const known = KNOWN_MODELS[name]!;
      // The graph's output kind and size are the table's: a family whose facts say otherwise gets a different mask.
      await writeFile(path.join(u2netHome, known.fileNames[PUBLISHED_NAME.has(name) ? 1 : 0]!), familyGraph(known.family, { output: REMBG[name]!.output, size: REMBG[name]!.size }));
      profiles[name] = modelProfile(name);
    }
    // Opset 10: Clip has no bound inputs yet, so the rewrite refuses it and the file is served as it is.
    const legacy = path.join(dir, 'elsewhere', 'old-birefnet.onnx');
    await mkdir(path.dirname(legacy));
    await writeFile(legacy, familyGraph('birefnet', { opset: 10, output: REMBG['birefnet-general']!.output }));
    profiles.legacy = modelProfile('birefnet-general', { prepared: false });

    server = await startInferenceProcess(
      [...NAMES.flatMap((name) => ['--model', name]), '--model-file', `legacy=${legacy}`, '--family', 'birefnet-general', '--threads', '1'],
      { U2NET_HOME: u2netHome, HOME: path.join(dir, 'home'), XDG_DATA_HOME: '', BGCUT_CACHE_DIR: path.join(dir, 'cache') },
    );
    const store = new FileKeyStore({ file: path.join(dir, 'keys.json'), reloadIntervalMs: 0 });
    roomy = (await store.createKey({ accountId: 'acct_roomy', plan: 'roomy' })).key;
    onlyU2net = (await store.createKey({ accountId: 'acct_u2net', plan: 'only_u2net' })).key;
    recordIssuedKeys([roomy, onlyU2net]);
    handler = createRemoveBgHandler({
      keyStore: store,
      plans: { roomy: { requestsPerMinute: 1000 }, only_u2net: { requestsPerMinute: 1000, models: ['u2net'] } },
      inference: { address: server.address, models: profiles, modelName: 'birefnet-general', timeoutMs: 30_000 },
      onInternalError: captureInternalError,
    });
    // Checks every model's metadata against its profile (the prepared signature, or the file's own).
    await handler.ready();
    http = createAdaptorServer({ fetch: createFetchHandler(handler) }) as Server;
    http.listen(0, '127.0.0.1');
    await new Promise((resolve) => http.once('listening', resolve));
    base = baseUrlOf(http);
  }, 120_000);

  afterAll(async () => {
    http?.closeAllConnections();
    await new Promise((resolve) => http?.close(resolve));
    await handler?.close();
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  // One test card per size and one expected alpha per normalisation, made once: the models share them.
  const cards = new Map<number, Promise<{ card: Buffer; png: Buffer }>>();
  const cardOf = (size: number) => {
    if (!cards.has(size)) {
      const card = testCard(size);
      cards.set(size, sharp(card, { raw: { width: size, height: size, channels: 3 } }).png({ compressionLevel: 1 }).toBuffer().then((png) => ({ card, png })));
    }
    return cards.get(size)!;
  };
  const expectations = new Map<string, Uint8Array>();
  const expectedFor = (card: Buffer, normalisation: { mean: number[]; std: number[] }, sigmoid = true) => {
    const key = JSON.stringify([card.length, normalisation.mean, normalisation.std, sigmoid]);
    if (!expectations.has(key)) expectations.set(key, expectedAlpha(card, normalisation, undefined, sigmoid));
    return expectations.get(key)!;
  };

  async function cutout(model: string, size: number, key = roomy) {
    const { card, png } = await cardOf(size);
    const form = new FormData();
    form.append('file', new Blob([png], { type: 'image/png' }), 'card.png');
    const response = await fetch(`${base}/v1/remove-bg?model=${model}&quality=fast&format=png`, { method: 'POST', headers: { 'x-api-key': key }, body: form });
    return { response, card };
  }

  const maxDifference = (a: Uint8Array, b: Uint8Array) => {
    let most = 0;
    for (let i = 0; i < a.length; i++) most = Math.max(most, Math.abs(a[i]! - b[i]!));
    return most;
  };

  it.each(NAMES)('%s: found under rembg\'s file name, prepared, and the alpha is the one rembg\'s normalisation and output give (from the table)', async (name) => {
    const row = REMBG[name]!;
    const size = row.size;
    expect(profiles[name]!.width).toBe(size);
    const { response, card } = await cutout(name, size);
    expect(response.status).toBe(200);
    const { alpha, width } = await decodeAlpha(Buffer.from(await response.arrayBuffer()));
    expect(width).toBe(size);
    const expected = expectedFor(inOrder(card, row.channels), row);
    expect(new Set(expected).size).toBeGreaterThan(100);
    // Float32 in the graph against doubles here: at most one level apart.
    expect(maxDifference(alpha, expected)).toBeLessThanOrEqual(1);
    if (row.output === 'logits') {
      // Logits: the stretched logits (no sigmoid) would be a visibly different mask.
      expect(maxDifference(expectedFor(card, row, false), expected)).toBeGreaterThan(30);
    }
  });

  it('a file whose graph cannot be prepared is served as published: the FP32 profile normalises, applies the sigmoid and stretches in the API', async () => {
    expect(server.output()).toMatch(/model legacy: served as published \(FP32 in and out\) because the graph could not be prepared: opset 10/);
    const { response, card } = await cutout('legacy', 1024);
    expect(response.status).toBe(200);
    const { alpha } = await decodeAlpha(Buffer.from(await response.arrayBuffer()));
    expect(maxDifference(alpha, expectedFor(card, REMBG['birefnet-general']!))).toBeLessThanOrEqual(1);
  });

  it('GET /v1/models lists every model with its family, input size, licence and modes; bria-rmbg says it is non-commercial', async () => {
    const response = await fetch(`${base}/v1/models`);
    expect(response.status).toBe(200);
    const checker = new OpenApiResponseChecker(await (await fetch(`${base}/v1/openapi.json`)).json());
    const body = Buffer.from(await response.clone().arrayBuffer());
    expect(checker.check('GET', `${base}/v1/models`, response.status, response.headers, body), 'conforms to /v1/openapi.json').toEqual([]);
    const { models } = (await response.json()) as { models: { name: string; default: boolean; family: string; input: { width: number }; licence: string; commercialUse: boolean | null; notice?: string; modes: Record<string, { size: number; passes: number }> }[] };
    expect(models.map((m) => m.name)).toEqual(['birefnet-general', ...[...NAMES.filter((n) => n !== 'birefnet-general'), 'legacy'].sort()]);
    const byName = Object.fromEntries(models.map((m) => [m.name, m]));
    expect(byName['birefnet-general']).toMatchObject({ default: true, family: 'birefnet', input: { width: 1024 }, licence: 'MIT', commercialUse: true });
    expect(byName.u2net).toMatchObject({ default: false, family: 'u2net', input: { width: 320 }, licence: 'Apache-2.0', commercialUse: true, modes: { fast: { size: 320, passes: 1 }, balanced: { size: 320, passes: 1 } } });
    expect(byName.u2net!.modes.best!.passes).toBeGreaterThan(1);
    expect(byName['bria-rmbg']).toMatchObject({ family: 'bria-rmbg', licence: 'CC-BY-NC-4.0', commercialUse: false, notice: expect.stringMatching(/non-commercial/i) });
    expect(byName.ben2).toMatchObject({ family: 'ben2', licence: 'MIT' });
    expect(byName.legacy).toMatchObject({ family: 'birefnet', licence: 'MIT' });
    expect(models.filter((m) => m.notice).map((m) => m.name)).toEqual(['bria-rmbg']);
  });

  it('the server says at start-up which licence each model has, and that bria-rmbg is for non-commercial use only', () => {
    const log = server.output();
    expect(log).toMatch(/model bria-rmbg: licence CC-BY-NC-4\.0: NON-COMMERCIAL use only/);
    expect(log).toMatch(/model birefnet-general: family birefnet \(birefnet-general\) from .*BiRefNet-general-epoch_244\.onnx, licence MIT/);
    expect(log).toMatch(/model u2net: family u2net \(u2net\) from .*u2net-home\/u2net\.onnx, licence Apache-2\.0/);
    // The synthetic files are not rembg's downloads, and the server says so.
    expect(log).toMatch(/model u2net: the file differs from rembg's download \(MD5\)/);
    expect(log.match(/NON-COMMERCIAL/g)).toHaveLength(1);
  });

  it('the model metadata reports family, licence and preparation: the prepared signature, or the file\'s own when served as published', async () => {
    const client = new InferenceClient({ address: server.address, timeoutMs: 10_000, maxMessageBytes: 64 * 1024 * 1024, retryAfterSeconds: 1 });
    try {
      const bria = await client.metadata('bria-rmbg', 10_000);
      expect(bria.properties).toMatchObject({ family: 'bria-rmbg', known_model: 'bria-rmbg', licence: 'CC-BY-NC-4.0', commercial_use: 'false', prepared: 'true' });
      expect(bria.inputs.map((t) => [t.name, t.datatype, t.shape.map(Number)])).toEqual([['image', 'UINT8', [1, 1024, 1024, 3]]]);
      expect(bria.outputs.map((t) => [t.name, t.datatype, t.shape.map(Number)])).toEqual([['mask', 'UINT8', [1, 1, 1024, 1024]]]);
      expect(bria.properties.free_size).toBe('false');
      // ISNet's graphs go through the free-size pass: any input height and width.
      const isnet = await client.metadata('isnet-general-use', 10_000);
      expect(isnet.properties).toMatchObject({ family: 'isnet', prepared: 'true', free_size: 'true' });
      expect(isnet.inputs.map((t) => t.shape.map(Number))).toEqual([[1, -1, -1, 3]]);
      // U²-Net's six side outputs are pruned: the mask alone comes back.
      expect((await client.metadata('u2net', 10_000)).outputs.map((t) => t.name)).toEqual(['mask']);
      const legacy = await client.metadata('legacy', 10_000);
      expect(legacy.properties).toMatchObject({ family: 'birefnet', licence: 'MIT', prepared: 'false' });
      expect(legacy.inputs.map((t) => [t.name, t.datatype, t.shape.map(Number)])).toEqual([['input_image', 'FP32', [1, 3, 1024, 1024]]]);
    } finally {
      client.close();
    }
  });

  it('plans gate family models like any other: a plan with only u2net may not use birefnet-general', async () => {
    const refused = await cutout('birefnet-general', 1024, onlyU2net);
    expect(refused.response.status).toBe(403);
    expect(((await refused.response.json()) as { code: string }).code).toBe('option_not_in_plan');
    expect((await cutout('u2net', 320, onlyU2net)).response.status).toBe(200);
  });

  it('a missing model file stops the server at start-up, naming every path tried and where rembg users get it', async () => {
    const home = path.join(dir, 'empty-home');
    const failure = await promisify(execFile)(process.execPath, [CLI, '--port', '0', '--model', 'birefnet-portrait'], {
      env: { ...process.env, U2NET_HOME: path.join(dir, 'nowhere'), HOME: home, XDG_DATA_HOME: path.join(dir, 'xdg'), BGCUT_CACHE_DIR: path.join(dir, 'cache') },
    }).then(
      () => undefined,
      (error: { code: number; stderr: string }) => error,
    );
    expect(failure?.code).toBe(1);
    for (const folder of [path.join(dir, 'nowhere'), path.join(dir, 'xdg', '.u2net'), path.join(home, '.u2net')]) {
      expect(failure?.stderr).toContain(path.join(folder, 'birefnet-portrait.onnx'));
      expect(failure?.stderr).toContain(path.join(folder, 'BiRefNet-portrait-epoch_150.onnx'));
    }
    expect(failure?.stderr).toContain('https://github.com/danielgatis/rembg/releases/download/v0.0.0/BiRefNet-portrait-epoch_150.onnx');
    expect(failure?.stderr).toContain('--model-file PATH --family birefnet-portrait');
  });
});
