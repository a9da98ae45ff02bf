import { execFileSync } from 'node:child_process';
import net from 'node:net';
import tls from 'node:tls';
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
import { createTestKeys, multipartBody, TEST_PLANS, type TestKeys } from './helpers/fixtures.js';
import { coreRequest } from './helpers/fuzz.js';
import { startInferenceProcess, type InferenceProcess } from './helpers/inference-process.js';
import { objectOnTexture } from './helpers/synthetic-image.js';
import { captureInternalError } from './helpers/log-capture.js';
import { metricValue } from './helpers/fuzz.js';
import { settle } from './helpers/abort-storm.js';

async function startApi(keys: TestKeys, extra: Partial<RemoveBgOptions>) {
  const handler: RemoveBgHandler = createRemoveBgHandler({ keyStore: keys.store, plans: TEST_PLANS, onInternalError: captureInternalError, ...extra });
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

/** A server's calls answered OK, and calls running or queued now, read in one scrape. */
async function serverState(server: InferenceProcess): Promise<{ ok: number; inFlight: number }> {
  const text = await (await fetch(server.metricsUrl!)).text();
  return {
    ok: metricValue(text, 'bgcut_inference_calls_total', 'status="OK"'),
    inFlight: metricValue(text, 'bgcut_inference_running') + metricValue(text, 'bgcut_inference_queue_depth'),
  };
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
    const survivors = [servers[0]!, servers[2]!];
    const survivorsBefore = (await Promise.all(survivors.map(okCalls))).reduce((a, b) => a + b, 0);
    const victimBefore = await okCalls(victim);
    const load = Promise.all(Array.from({ length: 9 }, () => cutout(api.url, keys.good, image)));
    // Event-based: kill it once it has calls in flight (running or queued), as its metrics say.
    const deadline = Date.now() + 60_000;
    let victimState = await serverState(victim);
    while (victimState.inFlight < 1 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
      victimState = await serverState(victim);
    }
    victim.child.kill('SIGKILL');
    expect(victimState.inFlight).toBeGreaterThanOrEqual(1);
    const results = await load;
    expect(results.map((r) => r.status)).toEqual(Array(9).fill(200));
    // Every cutout was answered OK by some server: those the victim had not finished when it died,
    // its calls in flight among them, were answered by the other two.
    const victimServed = victimState.ok - victimBefore;
    const survivorsServed = (await Promise.all(survivors.map(okCalls))).reduce((a, b) => a + b, 0) - survivorsBefore;
    expect(survivorsServed).toBeGreaterThanOrEqual(9 - victimServed);
    expect(survivorsServed).toBeGreaterThanOrEqual(victimState.inFlight);
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
      expect(meta.properties.execution_provider).toBe('cpu');
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
    // The float model only: its session.run (~2 s at 1024 on 2 cores) keeps the one slot busy while
    // the three requests below are uploaded and tried. On the 8-bit default (~0.5 s) the first
    // cutout was over before them once in CI, and one of them got a 200.
    server = await startInferenceProcess(['--queue', '0', '--metrics-port', '0', '--model', 'isnet']);
  });
  afterAll(() => server?.stop());

  it('answers 503 fast when every inference server is full, then before reading uploads', async () => {
    const api = await startApi(keys, { inference: { address: server.address } });
    try {
      const first = cutout(api.url, keys.good, image);
      let firstDone = false;
      void first.then(() => (firstDone = true));
      // Event-based: once the first is inside session.run, as the server's metrics say.
      await settle(async () => metricValue(await (await fetch(server.metricsUrl!)).text(), 'bgcut_inference_running'), (n) => n >= 1, 60_000);
      // These are uploaded and tried (the server says its queue is full) while the first still runs.
      const refused = await Promise.all(Array.from({ length: 3 }, () => cutout(api.url, keys.good, image)));
      const refusedWhileFirstRan = !firstDone;
      for (const r of refused) expect([r.status, r.code]).toEqual([503, 'inference_unavailable']);
      expect(refusedWhileFirstRan).toBe(true);
      // Right after, the API knows: it refuses without reading the upload at all.
      const next = await cutout(api.url, keys.good, Buffer.alloc(4 * 1024 * 1024, 1));
      expect([next.status, next.code]).toEqual([503, 'inference_unavailable']);
      expect(next.ms).toBeLessThan(1500); // a margin for a busy machine; reading 4 MiB is not the claim
      expect((await first).status).toBe(200);
    } finally {
      await api.close();
    }
  }, 180_000); // event waits of up to 60 s (a whole cutout on a busy box): settle(), not the test timeout, reports a gauge that never moves

  it('bounds the uploads in progress in the API tier: over the cap, 503 server_busy before the upload is read', async () => {
    const api = await startApi(keys, { inference: { address: server.address }, limits: { maxInFlight: 1 } });
    // The previous test's calls are all over on the server (none running or queued) before this one starts.
    await settle(
      async () => {
        const text = await (await fetch(server.metricsUrl!)).text();
        return metricValue(text, 'bgcut_inference_running') + metricValue(text, 'bgcut_inference_queue_depth');
      },
      (n) => n === 0,
      60_000,
    );
    try {
      const first = cutout(api.url, keys.good, image);
      await settle(async () => metricValue(await (await fetch(server.metricsUrl!)).text(), 'bgcut_inference_running'), (n) => n >= 1, 60_000);
      const big = Buffer.alloc(8 * 1024 * 1024, 1);
      const refused = await Promise.all(Array.from({ length: 4 }, () => cutout(api.url, keys.good, big)));
      for (const r of refused) expect([r.status, r.code]).toEqual([503, 'server_busy']);
      expect((await first).status).toBe(200);
    } finally {
      await api.close();
    }
  }, 180_000); // event waits (a whole cutout on a busy box), not a timing claim
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

  /**
   * Through the handler's own path: ready() (model metadata), then a cutout over ModelInfer.
   * Resolves with the cutout's status, or the reason the connection was refused.
   */
  const tryHandler = async (tls?: { ca: Buffer; cert?: Buffer; key?: Buffer }): Promise<{ ready: string; status: number; code?: string }> => {
    const keys = await createTestKeys();
    const handler = createRemoveBgHandler({
      keyStore: keys.store,
      plans: TEST_PLANS,
      inference: { address: `localhost:${server.port}`, timeoutMs: 20_000, startupTimeoutMs: 2_000, ...(tls ? { tls } : {}) },
      onInternalError: captureInternalError,
    });
    try {
      const ready = await handler.ready().then(
        () => 'ready',
        (error: Error) => `refused: ${error.message}`,
      );
      const image = await objectOnTexture(64, 48);
      const { body, contentType } = multipartBody([{ name: 'file', filename: 'a.jpg', type: 'image/jpeg', data: image.bytes }]);
      const response = await handler.handle(coreRequest({ headers: { 'x-api-key': keys.good, 'content-type': contentType }, chunks: [body] }));
      const code = response.status === 200 ? undefined : (JSON.parse(response.body.toString()) as { code: string }).code;
      return { ready, status: response.status, ...(code ? { code } : {}) };
    } finally {
      await handler.close();
    }
  };
  const read = (name: string) => readFileSync(file(name));

  it("accepts a client with a certificate from the trusted CA: the handler's cutout goes through", async () => {
    expect(await tryHandler({ ca: read('ca.pem'), cert: read('api.pem'), key: read('api.key') })).toEqual({ ready: 'ready', status: 200 });
  });

  /** What the server's TLS layer says to these credentials, without gRPC in between. */
  const tlsProbe = (creds: { ca: Buffer; cert?: Buffer; key?: Buffer }) =>
    new Promise<string>((resolve) => {
      const socket = tls.connect({ host: '127.0.0.1', port: server.port, servername: 'localhost', ALPNProtocols: ['h2'], ...creds });
      let error = '';
      socket.on('error', (e: NodeJS.ErrnoException) => (error = `${e.code ?? ''} ${e.message}`));
      // TLS 1.3 reports a refused client certificate after the client's side of the handshake:
      // read until the server says something or hangs up.
      let handshaken = false;
      socket.on('secureConnect', () => {
        handshaken = true;
        setTimeout(() => resolve(error || (socket.destroyed ? 'closed after the handshake' : 'accepted')), 1000).unref();
      });
      socket.on('data', () => {});
      socket.on('close', () => setImmediate(() => resolve(error || (handshaken ? 'closed after the handshake' : 'closed during the handshake'))));
    }).finally(() => undefined);
  /** What a plaintext HTTP/2 client gets: any answer's first byte, or a hang-up. */
  const plaintextProbe = () =>
    new Promise<string>((resolve) => {
      const socket = net.connect(server.port, '127.0.0.1', () => socket.write('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'));
      socket.once('data', (chunk: Buffer) => {
        resolve(`first byte 0x${chunk[0]!.toString(16)}`);
        socket.destroy();
      });
      socket.on('error', (error: NodeJS.ErrnoException) => resolve(`${error.code}`));
      socket.on('close', () => resolve('closed'));
    });

  it('refuses a plaintext client, a client with no certificate, and one with a certificate from another CA, at the TLS layer', async () => {
    const creds = {
      plaintext: undefined,
      noCertificate: { ca: read('ca.pem') },
      otherCa: { ca: read('ca.pem'), cert: read('intruder.pem'), key: read('intruder.key') },
    };
    const outcomes = {
      plaintext: await tryHandler(creds.plaintext),
      noCertificate: await tryHandler(creds.noCertificate),
      otherCa: await tryHandler(creds.otherCa),
    };
    const layer = {
      plaintext: await plaintextProbe(),
      noCertificate: await tlsProbe(creds.noCertificate),
      otherCa: await tlsProbe(creds.otherCa),
      trusted: await tlsProbe({ ca: read('ca.pem'), cert: read('api.pem'), key: read('api.key') }),
    };
    console.log(`mTLS at the TLS layer: ${JSON.stringify(layer)}; the handler: ${JSON.stringify(outcomes)}`);
    // The handler's cutout is refused as the inference being unavailable, never run...
    for (const outcome of Object.values(outcomes)) {
      expect([outcome.status, outcome.code]).toEqual([503, 'inference_unavailable']);
      expect(outcome.ready).toMatch(/^refused: 14 UNAVAILABLE/);
    }
    // ...and on the same address, what refuses each of them is TLS, not the network: the trusted
    // certificate is accepted; a missing one gets the 'certificate required' alert; one from
    // another CA completes the client's side of the handshake and is hung up on (the server
    // rejects it on verification); plaintext HTTP/2 gets no answer but a hang-up.
    expect(layer.trusted).toBe('accepted');
    expect(layer.noCertificate).toMatch(/ALERT_CERTIFICATE_REQUIRED/);
    expect(layer.otherCa).toMatch(/closed after the handshake|UNKNOWN_CA|BAD_CERTIFICATE/);
    expect(layer.plaintext).toBe('closed');
  });
});
