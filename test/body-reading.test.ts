import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import express from 'express';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { createRemoveBgRouter } from '../src/adapters/express.js';
import { removeBgPlugin } from '../src/adapters/fastify.js';
import { coreRequestOf } from '../src/adapters/node-request.js';
import { createRemoveBgHandler, type RemoveBgHandler } from '../src/core/index.js';
import { readForm } from '../src/dashboard/http.js';
import { BodyReadError, readBody } from '../src/util/read-body.js';
import { drivenRequest } from './helpers/core-request.js';
import { createTestKeys, multipartBody, TEST_PLANS, type TestKeys } from './helpers/fixtures.js';
import { captureInternalError } from './helpers/log-capture.js';

const urlOf = (server: http.Server) => `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

async function listen(app: http.RequestListener): Promise<http.Server> {
  const server = http.createServer(app).listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return server;
}

function close(server: http.Server): void {
  server.closeAllConnections();
  server.close();
}

/** The answer, or 'still waiting' when none came within `ms` (the bug this file is about is a wait that never ends). */
const within = <T>(ms: number, answer: Promise<T>) => Promise.race([answer, new Promise<'still waiting'>((r) => setTimeout(() => r('still waiting'), ms).unref())]);

describe('reading request bodies', () => {
  let keys: TestKeys;
  let handler: RemoveBgHandler;
  const internalErrors: unknown[] = [];

  beforeAll(async () => {
    keys = await createTestKeys();
    handler = createRemoveBgHandler({
      keyStore: keys.store,
      plans: TEST_PLANS,
      inference: { address: inject('inferenceAddress') },
      // Long enough that an answer within the test's wait cannot be the upload timer's 408.
      limits: { uploadTimeoutMs: 30_000 },
      onInternalError: (error) => {
        internalErrors.push(error);
        captureInternalError(error);
      },
    });
  });
  afterAll(() => handler.close());

  it('a request refused before admission (no API key) has at most 64 KiB of its body read, then its connection closed', async () => {
    const driven = drivenRequest();
    const response = await handler.handle(driven.request);
    expect(response.status).toBe(401);
    // The client keeps sending after the answer; the server reads a little of it, then closes.
    const chunk = Buffer.alloc(16 * 1024);
    let sent = 0;
    while (!driven.body.destroyed && sent < 4 * 1024 * 1024) {
      driven.body.write(chunk);
      sent += chunk.length;
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(driven.body.destroyed, `still reading after ${sent} bytes`).toBe(true);
    expect(sent).toBeLessThanOrEqual(64 * 1024 + 2 * chunk.length);
  });

  describe('behind an Express body parser that read the body first', () => {
    let server: http.Server;
    beforeAll(async () => {
      const app = express();
      // Host parsers mounted before bgcut, as the review found them: every body read as raw bytes, JSON as text.
      app.use(express.text({ type: 'application/json' }));
      app.use(express.raw({ type: 'multipart/form-data', limit: '10mb' }));
      app.use(createRemoveBgRouter(handler));
      server = await listen(app);
    });
    afterAll(() => close(server));

    it('a multipart upload is answered at once with 500 body_already_read naming the parser to move, not 408 after the upload timeout', async () => {
      const form = multipartBody([{ name: 'file', filename: 'a.png', type: 'image/png', data: Buffer.alloc(1000, 7) }]);
      internalErrors.length = 0;
      const answer = await within(10_000, fetch(`${urlOf(server)}/v1/remove-bg`, { method: 'POST', headers: { 'x-api-key': keys.good, 'content-type': form.contentType }, body: form.body }));
      expect(answer).not.toBe('still waiting');
      const response = answer as Response;
      const problem = (await response.json()) as { code: string; detail: string };
      expect([response.status, problem.code]).toEqual([500, 'body_already_read']);
      expect(problem.detail).toMatch(/body parser mounted ahead of bgcut/);
      // The operator hears of it: a setup mistake, not the client's.
      expect(internalErrors.some((e) => (e as { code?: string }).code === 'body_already_read')).toBe(true);
    });

    it('a JSON image_url body the host read as text: 500 body_already_read, not 400 malformed_json', async () => {
      const response = await fetch(`${urlOf(server)}/v1/remove-bg`, {
        method: 'POST',
        headers: { 'x-api-key': keys.good, 'content-type': 'application/json' },
        body: JSON.stringify({ image_url: 'http://images.test/a.jpg' }),
      });
      expect([response.status, ((await response.json()) as { code: string }).code]).toEqual([500, 'body_already_read']);
    });
  });

  it("the dashboard's form reader behind express.urlencoded(): refused at once, never waited for", async () => {
    const outcomes: string[] = [];
    const app = express();
    app.use(express.urlencoded({ extended: false }));
    app.post('/form', (req, res) => {
      const request = coreRequestOf(req, res, { url: req.originalUrl, clientIp: req.ip });
      readForm(request).then(
        (form) => res.end(`read ${form.toString()}`),
        (error: Error) => res.status(500).end(error.name),
      );
    });
    const server = await listen(app);
    try {
      const answer = await within(5_000, fetch(`${urlOf(server)}/form`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'email=a%40b.test' }).then(async (r) => `${r.status} ${await r.text()}`));
      outcomes.push(answer);
    } finally {
      close(server);
    }
    expect(outcomes).toEqual(['500 BodyAlreadyReadError']);
  });

  it('a Fastify parser registered by the host never reaches bgcut: its plugin reads the body itself', async () => {
    const app = Fastify();
    let hostParserRan = 0;
    app.addContentTypeParser('multipart/form-data', (_request, payload, done) => {
      hostParserRan++;
      payload.resume();
      payload.on('end', () => done(null, 'consumed by the host'));
    });
    app.post('/host-upload', async (request) => ({ got: request.body }));
    await app.register(removeBgPlugin, { handler });
    await app.listen({ port: 0, host: '127.0.0.1' });
    try {
      const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
      // No file part: bgcut answers 400 missing_file only if it parsed the form itself.
      const form = multipartBody([{ name: 'format', data: 'png' }]);
      const response = await fetch(`${base}/v1/remove-bg`, { method: 'POST', headers: { 'x-api-key': keys.good, 'content-type': form.contentType }, body: form.body });
      expect([response.status, ((await response.json()) as { code: string }).code]).toEqual([400, 'missing_file']);
      expect(hostParserRan).toBe(0);
      const host = await fetch(`${base}/host-upload`, { method: 'POST', headers: { 'content-type': form.contentType }, body: form.body });
      expect(await host.json()).toEqual({ got: 'consumed by the host' });
      expect(hostParserRan).toBe(1);
    } finally {
      await app.close();
    }
  });

  describe('readBody', () => {
    it('refuses a declared Content-Length over the cap before reading a byte', async () => {
      const body = new PassThrough();
      body.write('x');
      const error = await readBody(body, { maxBytes: 10, declaredLength: '11' }).catch((e: unknown) => e);
      expect((error as BodyReadError).reason).toBe('too_large');
      expect(body.readableLength).toBe(1);
    });

    it('ends with `closed` when the stream closes mid-body, instead of waiting for an end that never comes', async () => {
      const body = new PassThrough();
      const reading = readBody(body, { maxBytes: 1000 });
      body.write('partial');
      body.destroy();
      const error = await within(2_000, reading.catch((e: unknown) => e));
      expect((error as BodyReadError).reason).toBe('closed');
    });

    it('ends with the signal\'s reason when it aborts, and stops listening', async () => {
      const body = new PassThrough();
      const controller = new AbortController();
      const reading = readBody(body, { maxBytes: 1000, signal: controller.signal });
      controller.abort(new Error('client left'));
      expect(await reading.catch((e: Error) => e.message)).toBe('client left');
      expect(body.listenerCount('data')).toBe(0);
    });
  });
});

describe('readBody: a large body of declared length', () => {
  // Chunks arrive one by one, as from a socket; the reader copies each into one allocation.
  const send = async (body: Buffer, declared: number) => {
    const stream = new PassThrough();
    const read = readBody(stream, { maxBytes: 1024 * 1024, declaredLength: declared });
    for (let at = 0; at < body.length; at += 16 * 1024) {
      stream.write(body.subarray(at, at + 16 * 1024));
      await new Promise((resolve) => setImmediate(resolve));
    }
    stream.end();
    return read;
  };
  const body = Buffer.from(Array.from({ length: 200 * 1024 }, (_, i) => (i * 7) & 255));

  it('comes back whole, in memory of its own (movable to a worker), with no copy of the whole body at its end (written as it came)', async () => {
    const concat = vi.spyOn(Buffer, 'concat');
    try {
      const read = await send(body, body.length);
      expect(read.equals(body)).toBe(true);
      expect(read.byteOffset === 0 && read.byteLength === read.buffer.byteLength).toBe(true);
      expect(concat).not.toHaveBeenCalled();
    } finally {
      concat.mockRestore();
    }
  });

  it('shorter or longer than declared (a stream with no HTTP parser under it): the bytes that came, as they came', async () => {
    expect((await send(body, body.length + 1000)).equals(body)).toBe(true);
    expect((await send(body, body.length - 70_000)).equals(body)).toBe(true);
  });
});
