import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import onnxProto from 'onnx-proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveModelFile } from '../src/inference-server/model-source.js';
import { exportTritonRepository, tensorConfigs, tritonConfig } from '../src/inference-server/triton-export.js';

const CLI = fileURLToPath(new URL('../dist/src/inference-server/cli.js', import.meta.url));
const sha256 = async (file: string) => createHash('sha256').update(await readFile(file)).digest('hex');

// Triton cannot run here (no container runtime, no download): these tests check the repository's
// layout and config against Triton's documented model configuration, not a live Triton.
describe('export --triton', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-triton-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('writes isnet/1/model.onnx (the prepared model) and a config.pbtxt naming its tensors, datatypes, dims, instance group and batcher', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, [CLI, 'export', '--triton', dir, '--instance-kind', 'KIND_GPU', '--instances', '2', '--max-batch', '8']);
    expect(stdout).toContain(`tritonserver --model-repository ${dir}`);
    expect(await readdir(dir)).toEqual(['isnet']);
    expect((await readdir(path.join(dir, 'isnet'))).sort()).toEqual(['1', 'config.pbtxt']);
    expect(await readdir(path.join(dir, 'isnet', '1'))).toEqual(['model.onnx']);
    expect(await sha256(path.join(dir, 'isnet', '1', 'model.onnx'))).toBe(await sha256(await resolveModelFile('isnet')));
    expect(await readFile(path.join(dir, 'isnet', 'config.pbtxt'), 'utf8')).toBe(
      [
        'name: "isnet"',
        'platform: "onnxruntime_onnx"',
        'max_batch_size: 8',
        'input [',
        '  {',
        '    name: "image"',
        '    data_type: TYPE_UINT8',
        '    dims: [ -1, -1, 3 ]',
        '  }',
        ']',
        'output [',
        '  {',
        '    name: "mask"',
        '    data_type: TYPE_UINT8',
        '    dims: [ 1, -1, -1 ]',
        '  }',
        ']',
        'instance_group [',
        '  {',
        '    count: 2',
        '    kind: KIND_GPU',
        '  }',
        ']',
        'dynamic_batching { max_queue_delay_microseconds: 2000 }',
        'version_policy: { latest: { num_versions: 1 } }',
        '',
      ].join('\n'),
    );
  });

  it('maps free dimensions to -1 and ONNX types to Triton types, for any ONNX file', async () => {
    const { onnx } = onnxProto;
    const valueInfo = (name: string, elemType: number, dims: (number | string)[]) => ({
      name,
      type: { tensorType: { elemType, shape: { dim: dims.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })) } } },
    });
    const model = onnx.ModelProto.encode({
      irVersion: 8,
      opsetImport: [{ version: 15 }],
      graph: {
        name: 'tiny',
        node: [{ opType: 'Identity', input: ['x'], output: ['y'] }],
        input: [valueInfo('x', 1, ['batch', 3, 64, 64])],
        output: [valueInfo('y', 10, ['batch', 3, 64, 64])],
      },
    }).finish();
    expect(tensorConfigs(model)).toEqual({
      inputs: [{ name: 'x', dataType: 'TYPE_FP32', dims: [-1, 3, 64, 64] }],
      outputs: [{ name: 'y', dataType: 'TYPE_FP16', dims: [-1, 3, 64, 64] }],
    });
    expect(tritonConfig({ name: 'tiny', instanceKind: 'KIND_CPU', instances: 1, maxBatch: 0 }, tensorConfigs(model))).toContain('dims: [ -1, 3, 64, 64 ]');
    await expect(exportTritonRepository(dir, { name: '../escape', modelFile: 'x.onnx' })).rejects.toThrow(/model name/);
  });
});
