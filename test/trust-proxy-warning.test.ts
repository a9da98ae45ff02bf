import express from 'express';
import Fastify from 'fastify';
import { mkdtemp } from 'node:fs/promises';
import type http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createRemoveBgRouter } from '../src/adapters/express.js';
import { removeBgPlugin } from '../src/adapters/fastify.js';
import { createRemoveBgHandler, FileKeyStore, type RemoveBgHandler } from '../src/core/index.js';

const CODE = 'BGCUT_PERMISSIVE_TRUST_PROXY';
let handler: RemoveBgHandler;
let warnings: Error[] = [];
const onWarning = (warning: Error) => {
  if ((warning as Error & { code?: string }).code === CODE) warnings.push(warning);
};

beforeAll(async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-tp-'));
  // No request here gets past the key check, so the inference address is never dialled.
  handler = createRemoveBgHandler({ keyStore: new FileKeyStore({ file: path.join(dir, 'keys.json') }), inference: { address: '127.0.0.1:1' } });
});
afterAll(() => handler?.close());
beforeEach(() => {
  warnings = [];
  process.on('warning', onWarning);
});
afterEach(() => {
  process.off('warning', onWarning);
});

/** Node emits warnings on the next tick: let them arrive. */
const settle = () => new Promise((r) => setTimeout(r, 20));

async function expressStatuses(trust: unknown, requests: number): Promise<number[]> {
  const app = express();
  app.set('trust proxy', trust);
  app.use(createRemoveBgRouter(handler));
  const server: http.Server = app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const { port } = server.address() as { port: number };
  try {
    const statuses: number[] = [];
    for (let i = 0; i < requests; i++) {
      const r = await fetch(`http://127.0.0.1:${port}/v1/remove-bg`, { method: 'POST', headers: { 'x-forwarded-for': '203.0.113.9' } });
      await r.arrayBuffer();
      statuses.push(r.status);
    }
    return statuses;
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
}

async function fastifyStatuses(trustProxy: boolean | number | string, requests: number): Promise<number[]> {
  const app = Fastify({ trustProxy });
  // Mounted twice (two prefixes): still one app, one warning.
  await app.register(removeBgPlugin, { handler });
  await app.register(removeBgPlugin, { handler, prefix: '/api' });
  try {
    const statuses: number[] = [];
    for (let i = 0; i < requests; i++) {
      const r = await app.inject({ method: 'POST', url: '/v1/remove-bg', headers: { 'x-forwarded-for': '203.0.113.9' } });
      statuses.push(r.statusCode);
    }
    return statuses;
  } finally {
    await app.close();
  }
}

describe('a host app that trusts every proxy is warned once', () => {
  it("Express 'trust proxy' = true: one warning for many requests, naming the risk and the fix", async () => {
    expect(await expressStatuses(true, 3)).toEqual([401, 401, 401]);
    await settle();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.message).toMatch(/trust proxy/);
    expect(warnings[0]!.message).toMatch(/X-Forwarded-For/);
    expect(warnings[0]!.message).toMatch(/allowedIps/);
  });

  it.each([1, 'loopback', '10.0.0.0/8', false])("Express 'trust proxy' = %j: no warning", async (trust) => {
    await expressStatuses(trust, 2);
    await settle();
    expect(warnings).toHaveLength(0);
  });

  it('Fastify trustProxy: true: one warning for many requests', async () => {
    expect(await fastifyStatuses(true, 3)).toEqual([401, 401, 401]);
    await settle();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.message).toMatch(/trustProxy/);
  });

  it.each([1, '127.0.0.1', false])('Fastify trustProxy: %j: no warning', async (trustProxy) => {
    await fastifyStatuses(trustProxy, 2);
    await settle();
    expect(warnings).toHaveLength(0);
  });
});
