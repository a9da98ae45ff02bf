/**
 * The model for the quality scripts: a real inference server (started on first use), optionally
 * behind an on-disk cache of its answers keyed by model and input tensor, so that merge strategies
 * can be explored on the same masks without running the model again. Never point the cache at a
 * folder inside the project.
 */
import { createHash } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ISNET_FP32_PROFILE, ISNET_PROFILE } from '../src/core/index.js';
import { tensorOf } from '../src/core/image/model-input.js';
import type { MaskModel } from '../src/core/image/pipeline.js';
import { InferenceClient } from '../src/core/inference/inference-client.js';
import { startInferenceProcess, type InferenceProcess } from '../test/helpers/inference-process.js';

export interface ModelRunner {
  /** The first model's answers. */
  model: MaskModel;
  /** The answers of one of the models the runner was given, by its name. */
  modelNamed(name: string): MaskModel;
  /** Model calls answered by the server (not the cache). */
  calls: () => number;
  /** Whether the served model takes any input size (its metadata; starts the server). */
  freeSize: () => Promise<boolean>;
  close(): Promise<void>;
}

/** The prepared built-ins take 8-bit pixels; ISNet as shipped (and any other .onnx) FP32. */
const PREPARED_BUILTINS = ['isnet', 'isnet-u16', 'isnet-fp32', 'isnet-int8'];

/**
 * One inference server serving `modelNames` (one model: under the name `isnet`, as before;
 * several: each under its own name), and each model's answers, optionally cached on disk.
 */
export function modelRunner(modelNames: string | string[], cacheDir?: string): ModelRunner {
  const names = typeof modelNames === 'string' ? [modelNames] : [...new Set(modelNames)];
  const single = names.length === 1;
  const served = (modelName: string) => (single ? 'isnet' : modelName);
  const profileOf = (modelName: string) => (PREPARED_BUILTINS.includes(modelName) ? ISNET_PROFILE : ISNET_FP32_PROFILE);
  const maskModel = (client: InferenceClient, modelName: string) => {
    const profile = profileOf(modelName);
    return client.maskModel(served(modelName), modelName === 'isnet-u16' ? { ...profile, outputDatatype: 'UINT16', minMaxNormalize: true } : profile);
  };
  let started: Promise<{ server: InferenceProcess; client: InferenceClient }> | undefined;
  let calls = 0;
  const start = () =>
    (started ??= startInferenceProcess(['--model', single ? names[0]! : names.map((n) => `${n}=${n}`).join(',')]).then((server) => ({
      server,
      client: new InferenceClient({ address: server.address, timeoutMs: 600_000, maxMessageBytes: 64 << 20, retryAfterSeconds: 1 }),
    })));
  const infer = (modelName: string): MaskModel => async (input, signal, size) => {
    const { client } = await start();
    calls++;
    return maskModel(client, modelName)(input, signal, size);
  };
  const cached = (modelName: string): MaskModel => async (input, signal, size) => {
    const key = createHash('sha256')
      .update(modelName)
      .update(size ? `${size.width}x${size.height}` : '')
      .update(new Uint8Array(tensorOf(input).buffer, tensorOf(input).byteOffset, tensorOf(input).byteLength))
      .digest('hex');
    // The file's extension keeps the mask's element type (FP32, or 8/16-bit for prepared models).
    const kind = profileOf(modelName).outputDatatype === 'UINT8' ? 'u8' : 'f32';
    const file = path.join(cacheDir!, `${key.slice(0, 32)}.${modelName === 'isnet-u16' ? 'u16' : kind}`);
    try {
      const bytes = new Uint8Array(await readFile(file)).slice();
      const mask = file.endsWith('.u8') ? bytes : file.endsWith('.u16') ? new Uint16Array(bytes.buffer) : new Float32Array(bytes.buffer);
      return { mask, serverRunMs: 0 };
    } catch {
      const answer = await infer(modelName)(input, signal, size);
      await mkdir(cacheDir!, { recursive: true });
      await writeFile(file, new Uint8Array(answer.mask.buffer, answer.mask.byteOffset, answer.mask.byteLength));
      return answer;
    }
  };
  const byName = new Map(names.map((n) => [n, cacheDir ? cached(n) : infer(n)]));
  return {
    model: byName.get(names[0]!)!,
    modelNamed(name) {
      const model = byName.get(name);
      if (!model) throw new Error(`model ${name} is not one of ${names.join(', ')}`);
      return model;
    },
    calls: () => calls,
    async freeSize() {
      const { client } = await start();
      const sizes = await Promise.all(
        names.map(async (n) => {
          await client.verifyModel(served(n), profileOf(n), 30_000);
          return client.freeSize(served(n));
        }),
      );
      return sizes.every(Boolean);
    },
    async close() {
      if (!started) return;
      const { server, client } = await started;
      client.close();
      await server.stop();
    },
  };
}
