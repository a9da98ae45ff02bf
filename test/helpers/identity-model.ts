import onnxProto from 'onnx-proto';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';

/**
 * Writes an ONNX model that returns its input (`x` -> `y`, UINT8[1, side, side, 3]): a server
 * serving it does no compute, so its speed is set by --test-run-delay-ms alone (balancing tests
 * and bench/balancing.ts, where three servers share two cores).
 */
export async function writeIdentityModel(dir: string, side = 64): Promise<string> {
  const { onnx } = onnxProto;
  const tensor = (name: string) => ({ name, type: { tensorType: { elemType: 2 /* UINT8 */, shape: { dim: [1, side, side, 3].map((d) => ({ dimValue: d })) } } } });
  const bytes = onnx.ModelProto.encode({
    irVersion: 8,
    opsetImport: [{ version: 15 }],
    graph: { name: 'identity', node: [{ opType: 'Identity', input: ['x'], output: ['y'] }], input: [tensor('x')], output: [tensor('y')] },
  }).finish();
  const file = path.join(dir, 'identity.onnx');
  await writeFile(file, bytes);
  return file;
}
