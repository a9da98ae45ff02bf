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
import type { MaskModel } from '../src/core/image/pipeline.js';
import { InferenceClient } from '../src/core/inference/inference-client.js';
import { startInferenceProcess, type InferenceProcess } from '../test/helpers/inference-process.js';

export interface ModelRunner {
  model: MaskModel;
  /** Model calls answered by the server (not the cache). */
  calls: () => number;
  /** Whether the served model takes any input size (its metadata; starts the server). */
  freeSize: () => Promise<boolean>;
  close(): Promise<void>;
}

export function modelRunner(modelName: string, cacheDir?: string): ModelRunner {
  // The prepared built-ins take 8-bit pixels; ISNet as shipped (and any other .onnx) FP32.
  const profile = ['isnet', 'isnet-u16', 'isnet-fp32', 'isnet-int8'].includes(modelName) ? ISNET_PROFILE : ISNET_FP32_PROFILE;
  const maskModel = (client: InferenceClient) => client.maskModel('isnet', modelName === 'isnet-u16' ? { ...profile, outputDatatype: 'UINT16', minMaxNormalize: true } : profile);
  let started: Promise<{ server: InferenceProcess; client: InferenceClient }> | undefined;
  let calls = 0;
  const start = () =>
    (started ??= startInferenceProcess(['--model', modelName]).then((server) => ({
      server,
      client: new InferenceClient({ address: server.address, timeoutMs: 600_000, maxMessageBytes: 64 << 20, retryAfterSeconds: 1 }),
    })));
  const infer: MaskModel = async (input, signal, size) => {
    const { client } = await start();
    calls++;
    return maskModel(client)(input, signal, size);
  };
  const cached: MaskModel = async (input, signal, size) => {
    const key = createHash('sha256')
      .update(modelName)
      .update(size ? `${size.width}x${size.height}` : '')
      .update(new Uint8Array(input.buffer, input.byteOffset, input.byteLength))
      .digest('hex');
    // The file's extension keeps the mask's element type (FP32, or 8/16-bit for prepared models).
    const kind = profile.outputDatatype === 'UINT8' ? 'u8' : 'f32';
    const file = path.join(cacheDir!, `${key.slice(0, 32)}.${modelName === 'isnet-u16' ? 'u16' : kind}`);
    try {
      const bytes = new Uint8Array(await readFile(file)).slice();
      const mask = file.endsWith('.u8') ? bytes : file.endsWith('.u16') ? new Uint16Array(bytes.buffer) : new Float32Array(bytes.buffer);
      return { mask, serverRunMs: 0 };
    } catch {
      const answer = await infer(input, signal, size);
      await mkdir(cacheDir!, { recursive: true });
      await writeFile(file, new Uint8Array(answer.mask.buffer, answer.mask.byteOffset, answer.mask.byteLength));
      return answer;
    }
  };
  return {
    model: cacheDir ? cached : infer,
    calls: () => calls,
    async freeSize() {
      const { client } = await start();
      await client.verifyModel('isnet', profile, 30_000);
      return client.freeSize('isnet');
    },
    async close() {
      if (!started) return;
      const { server, client } = await started;
      client.close();
      await server.stop();
    },
  };
}
