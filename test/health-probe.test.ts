import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeIdentityModel } from './helpers/identity-model.js';
import { startInferenceProcess, type InferenceProcess } from './helpers/inference-process.js';

const run = promisify(execFile);
const CLI = fileURLToPath(new URL('../dist/src/inference-server/cli.js', import.meta.url));

/** `bgcut-inference-server health`: its exit code and what it printed. */
async function health(address: string): Promise<{ code: number; out: string }> {
  return run(process.execPath, [CLI, 'health', '--address', address, '--timeout-ms', '5000']).then(
    (r) => ({ code: 0, out: r.stdout.trim() }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, out: `${e.stdout}${e.stderr}`.trim() }),
  );
}

describe('health for containers and probes', () => {
  let dir: string;
  let server: InferenceProcess;
  let healthPort: number;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-health-'));
    const model = await writeIdentityModel(dir, 8);
    server = await startInferenceProcess(['--model', `tiny=${model}`, '--health-port', '0']);
    healthPort = Number(/health \(grpc\.health\.v1 only, plaintext\) on [^\s]+:(\d+)/.exec(server.output())![1]);
  });
  afterAll(async () => {
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('the health subcommand exits 0 and prints SERVING for a loaded server, on its port and on --health-port', async () => {
    expect(await health(server.address)).toEqual({ code: 0, out: 'SERVING' });
    expect(healthPort).not.toBe(server.port);
    expect(await health(`127.0.0.1:${healthPort}`)).toEqual({ code: 0, out: 'SERVING' });
  });

  it('exits 1 when nothing answers', async () => {
    const closed = await health('127.0.0.1:1');
    expect(closed.code).toBe(1);
    expect(closed.out).toMatch(/health check failed: 14 UNAVAILABLE/);
  });

  it('the health port serves health alone, not inference', async () => {
    const { InferenceClient } = await import('../src/core/inference/inference-client.js');
    const client = new InferenceClient({ address: `127.0.0.1:${healthPort}`, timeoutMs: 5000, maxMessageBytes: 1 << 20, retryAfterSeconds: 1 });
    try {
      await expect(client.metadata('tiny', 5000)).rejects.toMatchObject({ code: 12 }); // UNIMPLEMENTED
    } finally {
      client.close();
    }
  });
});
