import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ISNET_PROFILE } from '../src/core/index.js';
import { BEST_PASSES, maxPasses, segmentAtQuality } from '../src/core/image/multi-pass.js';
import { fullSizeAlpha, probeImage, type MaskModel } from '../src/core/image/pipeline.js';
import { PixelPool } from '../src/core/image/pixel-pool.js';
import type { PreprocessingProfile } from '../src/core/image/profile.js';
import { InferenceClient, ModelMismatchError } from '../src/core/inference/inference-client.js';
import { ModelVerifier } from '../src/core/inference/model-verifier.js';
import { objectOnTexture } from './helpers/synthetic-image.js';

const limits = { maxInputPixels: 40_000_000 };
const VERIFY = { startupTimeoutMs: 5_000, retryAfterSeconds: 1 };

/** A client that serves `served` (name -> free size) and answers NOT_FOUND for any other model. */
function stubClient(served: Record<string, boolean>, mismatched: string[] = []) {
  const asked: string[] = [];
  const client = {
    async verifyModel(name: string) {
      asked.push(name);
      if (mismatched.includes(name)) throw new ModelMismatchError(`model "${name}" does not fit`);
      if (!Object.hasOwn(served, name)) throw Object.assign(new Error(`5 NOT_FOUND: unknown model ${name}`), { code: 5 });
    },
    freeSize: (name: string) => served[name] ?? false,
  };
  return { client: client as unknown as InferenceClient, asked };
}

describe('the model each pass runs on (ModelVerifier.passModel)', () => {
  const models: Record<string, PreprocessingProfile> = { isnet: ISNET_PROFILE };

  it("the mode table's model when the servers serve it; checked once", async () => {
    const { client, asked } = stubClient({ isnet: true, 'isnet-int8': true });
    const verifier = new ModelVerifier(client, models, VERIFY);
    expect(await verifier.passModel('isnet', 'isnet-int8')).toBe('isnet-int8');
    expect(await verifier.passModel('isnet', 'isnet-int8')).toBe('isnet-int8');
    expect(asked).toEqual(['isnet-int8']);
    expect(await verifier.passModel('isnet', undefined)).toBe('isnet');
  });

  it("the request's model when the servers do not serve the table's (NOT_FOUND), with one warning", async () => {
    const { client } = stubClient({ isnet: true });
    const warnings: string[] = [];
    const verifier = new ModelVerifier(client, models, { ...VERIFY, warn: (m) => warnings.push(m) });
    await verifier.ready();
    expect(warnings).toEqual([expect.stringContaining('"isnet-int8", which the inference servers do not serve')]);
    expect(await verifier.passModel('isnet', 'isnet-int8')).toBe('isnet');
    expect(warnings.length).toBe(1);
  });

  it("the request's model when the table's has other tensors, or another free size", async () => {
    const mismatch = new ModelVerifier(stubClient({ isnet: true, 'isnet-int8': true }, ['isnet-int8']).client, models, { ...VERIFY, warn: () => {} });
    expect(await mismatch.passModel('isnet', 'isnet-int8')).toBe('isnet');
    const fixed = new ModelVerifier(stubClient({ isnet: true, 'isnet-int8': false }).client, models, VERIFY);
    expect(await fixed.passModel('isnet', 'isnet-int8')).toBe('isnet');
  });

  it('modeModels: false pins every pass to the request model and asks the servers nothing', async () => {
    const { client, asked } = stubClient({ isnet: true, 'isnet-int8': true });
    const verifier = new ModelVerifier(client, models, { ...VERIFY, modeModels: false });
    await verifier.ready();
    expect(await verifier.passModel('isnet', 'isnet-int8')).toBe('isnet');
    expect(asked).toEqual(['isnet']);
  });

  it('the shared test server (npm test, npm start) serves both built-ins: the table resolves to isnet-int8, an unknown model to the request model', async () => {
    const client = new InferenceClient({ address: inject('inferenceAddress'), timeoutMs: 60_000, maxMessageBytes: 64 << 20, retryAfterSeconds: 1 });
    try {
      const verifier = new ModelVerifier(client, models, { ...VERIFY, warn: () => {} });
      await verifier.ready();
      expect(ISNET_PROFILE.modes?.fast?.model).toBe('isnet-int8');
      expect(ISNET_PROFILE.modes?.balanced?.model).toBe('isnet-int8');
      expect(await verifier.passModel('isnet', ISNET_PROFILE.modes!.balanced!.model)).toBe('isnet-int8');
      expect(await verifier.passModel('isnet', 'no-such-model')).toBe('isnet');
    } finally {
      client.close();
    }
  }, 60_000);
});

describe('best with a model per pass (real models)', () => {
  let client: InferenceClient;
  const pool = new PixelPool({ threads: 1 });
  afterAll(() => pool.close());
  beforeAll(() => {
    client = new InferenceClient({ address: inject('inferenceAddress'), timeoutMs: 120_000, maxMessageBytes: 64 << 20, retryAfterSeconds: 1 });
  });
  afterAll(() => client?.close());

  it('the whole image runs on the whole-pass model, the crop and its mirror on the crop model', async () => {
    const calls: string[] = [];
    const counted = (name: string): MaskModel => (input, signal, size) => {
      calls.push(`${name}@${size?.width}`);
      return client.maskModel(name, ISNET_PROFILE)(input, signal, size);
    };
    // Small sizes keep it quick; the routing does not depend on them.
    const passes = { ...BEST_PASSES, cropSize: 256 };
    const plan = { size: 320, passes };
    const image = await objectOnTexture(640, 480);
    const probe = await probeImage(image.bytes, limits);
    const best = await segmentAtQuality('best', image.bytes, probe, ISNET_PROFILE, { whole: counted('isnet-int8'), crop: counted('isnet') }, limits, AbortSignal.timeout(120_000), pool, true, plan);
    expect(calls.length).toBe(maxPasses(passes));
    expect(calls.sort()).toEqual(['isnet-int8@320', 'isnet@256', 'isnet@256']);
    expect((await fullSizeAlpha(best, pool)).length).toBe(640 * 480);
  }, 120_000);
});
