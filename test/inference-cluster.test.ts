import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import express from 'express';
import type http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRemoveBgRouter } from '../src/adapters/express.js';
import { createRemoveBgHandler, type RemoveBgHandler, type RemoveBgOptions } from '../src/core/index.js';
import { InferenceClient } from '../src/core/inference/inference-client.js';
import { baseUrlOf } from './conformance/suite.js';
import { createTestKeys, TEST_PLANS, type TestKeys } from './helpers/fixtures.js';
import { startInferenceProcess, type InferenceProcess } from './helpers/inference-process.js';
import { objectOnTexture } from './helpers/synthetic-image.js';

async function startApi(keys: TestKeys, extra: Partial<RemoveBgOptions>) {
  const handler: RemoveBgHandler = createRemoveBgHandler({ keyStore: keys.store, plans: TEST_PLANS, onInternalError: () => {}, ...extra });
  await handler.ready();
  const server: http.Server = express().use(createRemoveBgRouter(handler)).listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  return {
    url: `${baseUrlOf(server)}/v1/remove-bg`,
    async close() {
      server.closeAllConnections();
      server.close();
      await handler.close();
    },
  };
}

async function cutout(url: string, key: string, bytes: Buffer) {
  const form = new FormData();
  form.append('file', new Blob([bytes]), 'a.jpg');
  const started = Date.now();
  const response = await fetch(url, { method: 'POST', headers: { 'x-api-key': key }, body: form });
  const body = Buffer.from(await response.arrayBuffer());
  return { status: response.status, ms: Date.now() - started, code: response.status === 200 ? undefined : (JSON.parse(body.toString()) as { code: string }).code };
}

/** ModelInfer calls a server answered OK, from its Prometheus endpoint. */
async function okCalls(server: InferenceProcess): Promise<number> {
  const port = /metrics on http:\/\/[^:]+:(\d+)/.exec(server.output())![1];
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('bgcut_inference_calls_total') && l.includes('status="OK"'));
  return line ? Number(line.split(' ').pop()) : 0;
}

describe('three inference servers behind one API instance', () => {
  let keys: TestKeys;
  let servers: InferenceProcess[];
  let api: Awaited<ReturnType<typeof startApi>>;
  let image: Buffer;

  beforeAll(async () => {
    keys = await createTestKeys();
    image = (await objectOnTexture(160, 120)).bytes;
    servers = await Promise.all([0, 1, 2].map(() => startInferenceProcess(['--metrics-port', '0', '--threads', '1'])));
    api = await startApi(keys, { inference: { address: servers.map((s) => s.address), timeoutMs: 60_000 } });
  }, 180_000);

  afterAll(async () => {
    await api?.close();
    await Promise.all((servers ?? []).map((s) => s.stop()));
  });

  it('spreads requests over all three', async () => {
    const results = await Promise.all(Array.from({ length: 6 }, () => cutout(api.url, keys.good, image)));
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200]);
    const counts = await Promise.all(servers.map(okCalls));
    console.log(`round robin: ModelInfer calls per server ${counts.join(', ')}`);
    for (const count of counts) expect(count).toBeGreaterThanOrEqual(1);
  }, 120_000);

  it('loses no request when one server dies under load: its calls are retried on the others', async () => {
    const victim = servers[1]!;
    const load = Promise.all(Array.from({ length: 9 }, () => cutout(api.url, keys.good, image)));
    await new Promise((r) => setTimeout(r, 800));
    victim.child.kill('SIGKILL');
    const results = await load;
    expect(results.map((r) => r.status)).toEqual(Array(9).fill(200));
    // And later requests go to the two that are left.
    expect((await cutout(api.url, keys.good, image)).status).toBe(200);
  }, 180_000);
});

describe('execution providers', () => {
  it('falls back from an unavailable provider to the next, says so in the log and in the metadata', async () => {
    const server = await startInferenceProcess(['--providers', 'cuda,cpu']);
    const client = new InferenceClient({ address: server.address, timeoutMs: 10_000, maxMessageBytes: 64 << 20, retryAfterSeconds: 1 });
    try {
      expect(server.output()).toMatch(/execution provider cuda unavailable/);
      expect(server.output()).toMatch(/on provider cpu \(fell back from cuda\)/);
      const meta = await client.metadata('isnet', 5000);
      expect(meta.parameters.execution_provider?.stringParam).toBe('cpu');
    } finally {
      client.close();
      await server.stop();
    }
  });

  it('refuses to start, rather than run on CPU unasked, when no listed provider works', async () => {
    await expect(startInferenceProcess(['--providers', 'cuda'])).rejects.toThrow(/no execution provider could load the model: cuda/);
  });
});

describe('backpressure', () => {
  let keys: TestKeys;
  let server: InferenceProcess;
  let image: Buffer;
  beforeAll(async () => {
    keys = await createTestKeys();
    image = (await objectOnTexture(160, 120)).bytes;
    server = await startInferenceProcess(['--queue', '0']);
  });
  afterAll(() => server?.stop());

  it('answers 503 fast when every inference server is full, then before reading uploads', async () => {
    const api = await startApi(keys, { inference: { address: server.address } });
    try {
      const first = cutout(api.url, keys.good, image);
      await new Promise((r) => setTimeout(r, 300));
      // These are uploaded and tried (the server says its queue is full) well before the first is done.
      const refused = await Promise.all(Array.from({ length: 3 }, () => cutout(api.url, keys.good, image)));
      for (const r of refused) {
        expect([r.status, r.code]).toEqual([503, 'inference_unavailable']);
        expect(r.ms).toBeLessThan(2500);
      }
      // Right after, the API knows: it refuses without reading the upload at all.
      const next = await cutout(api.url, keys.good, Buffer.alloc(4 * 1024 * 1024, 1));
      expect([next.status, next.code]).toEqual([503, 'inference_unavailable']);
      expect(next.ms).toBeLessThan(500);
      expect((await first).status).toBe(200);
    } finally {
      await api.close();
    }
  });

  it('bounds the uploads in progress in the API tier: over the cap, 503 server_busy before the upload is read', async () => {
    const api = await startApi(keys, { inference: { address: server.address }, limits: { maxInFlight: 1 } });
    await new Promise((r) => setTimeout(r, 1100)); // past the previous test's "all full" moment
    try {
      const first = cutout(api.url, keys.good, image);
      await new Promise((r) => setTimeout(r, 300));
      const big = Buffer.alloc(8 * 1024 * 1024, 1);
      const refused = await Promise.all(Array.from({ length: 4 }, () => cutout(api.url, keys.good, big)));
      for (const r of refused) expect([r.status, r.code]).toEqual([503, 'server_busy']);
      expect((await first).status).toBe(200);
    } finally {
      await api.close();
    }
  });
});

describe('TLS between the API and the inference servers', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bgcut-tls-'));
  const file = (name: string) => path.join(dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  /** A CA, and certificates it signs (with IP and DNS names for loopback). */
  function issue(ca: string, name: string) {
    openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`);
    writeFileSync(file(`${name}.ext`), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
    openssl('x509', '-req', '-in', `${name}.csr`, '-CA', `${ca}.pem`, '-CAkey', `${ca}.key`, '-CAcreateserial', '-out', `${name}.pem`, '-days', '2', '-extfile', `${name}.ext`);
  }
  let server: InferenceProcess;

  beforeAll(async () => {
    for (const ca of ['ca', 'rogue-ca']) openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${ca}.key`, '-out', `${ca}.pem`, '-days', '2', '-subj', `/CN=${ca}`);
    issue('ca', 'server');
    issue('ca', 'api');
    issue('rogue-ca', 'intruder');
    server = await startInferenceProcess(['--tls-cert', file('server.pem'), '--tls-key', file('server.key'), '--tls-client-ca', file('ca.pem')]);
    expect(server.output()).toContain('mTLS');
  });
  afterAll(() => server?.stop());

  const tryClient = async (tls?: { ca: Buffer; cert?: Buffer; key?: Buffer }) => {
    const client = new InferenceClient({ address: `localhost:${server.port}`, timeoutMs: 5000, maxMessageBytes: 64 << 20, retryAfterSeconds: 1, ...(tls ? { tls } : {}) });
    try {
      return (await client.metadata('isnet', 3000)).name;
    } catch (error) {
      return `refused: ${(error as Error).message.slice(0, 80)}`;
    } finally {
      client.close();
    }
  };
  const read = (name: string) => readFileSync(file(name));

  it('accepts a client with a certificate from the trusted CA', async () => {
    expect(await tryClient({ ca: read('ca.pem'), cert: read('api.pem'), key: read('api.key') })).toBe('isnet');
  });

  it('refuses a plaintext client, a client with no certificate, and one with a certificate from another CA', async () => {
    expect(await tryClient()).toMatch(/^refused/);
    expect(await tryClient({ ca: read('ca.pem') })).toMatch(/^refused/);
    expect(await tryClient({ ca: read('ca.pem'), cert: read('intruder.pem'), key: read('intruder.key') })).toMatch(/^refused/);
  });
});
