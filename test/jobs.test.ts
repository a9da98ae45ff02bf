import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, readdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import sharp from 'sharp';
import { unzipSync } from 'fflate';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createRemoveBgHandler, type CoreRequest, type CoreResponse, type RemoveBgHandler, type RemoveBgOptions } from '../src/core/index.js';
import { MemoryWebhookSecretStore } from '../src/core/jobs/webhooks/secrets.js';
import { MemoryDeliveryLog } from '../src/core/jobs/webhooks/deliveries.js';
import { createTestKeys, multipartBody, TEST_PLANS, type TestKeys } from './helpers/fixtures.js';
import { captureInternalError } from './helpers/log-capture.js';
import { objectOnTexture } from './helpers/synthetic-image.js';
import { guardConnections } from './helpers/connection-guard.js';
import { signal, within } from './helpers/within.js';

/** Generous: each image runs the real model, and a shared 2-core box can be slow. */
const MODEL_TEST_MS = 240_000;

const PLANS = {
  ...TEST_PLANS,
  batch_of_two: { requestsPerMinute: 1000, maxBatchImages: 2 },
  // Results kept 0.5 s: long enough to read once, short enough to see them expire.
  brief: { requestsPerMinute: 1000, jobRetentionHours: 0.5 / 3600 },
  metered: { requestsPerMinute: 1000, monthlyQuota: { unit: 'images' as const, amount: 100 } },
};

let keys: TestKeys;
let batchOfTwo: string;
let brief: string;
let metered: string;
let images: Buffer[];
let resultsDir: string;
beforeAll(async () => {
  keys = await createTestKeys();
  batchOfTwo = (await keys.store.createKey({ accountId: 'acct_batch2', plan: 'batch_of_two' })).key;
  brief = (await keys.store.createKey({ accountId: 'acct_brief', plan: 'brief' })).key;
  metered = (await keys.store.createKey({ accountId: 'acct_metered', plan: 'metered' })).key;
  images = [(await objectOnTexture(160, 120)).bytes, (await objectOnTexture(120, 160)).bytes, (await objectOnTexture(96, 96)).bytes];
  resultsDir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-jobs-test-'));
});

const handlers: RemoveBgHandler[] = [];
afterAll(async () => {
  await Promise.all(handlers.map((h) => h.close()));
});

function handlerWith(options: Partial<RemoveBgOptions> = {}): RemoveBgHandler {
  const handler = createRemoveBgHandler({
    keyStore: keys.store,
    plans: PLANS,
    // A deadline for a box under heavy load: a slow inference is not what these tests are about.
    inference: { address: inject('inferenceAddress'), timeoutMs: 120_000 },
    onInternalError: captureInternalError,
    ...options,
    jobs: { resultsDir, ...options.jobs },
  });
  handlers.push(handler);
  return handler;
}

/** A request straight into the core, its body sent whole. */
function coreRequest(method: string, url: string, key: string | undefined, body?: { body: Buffer; contentType: string }, headers: Record<string, string> = {}): CoreRequest {
  const stream = new PassThrough();
  stream.end(body?.body ?? Buffer.alloc(0));
  return {
    method,
    url,
    headers: { ...(key ? { 'x-api-key': key } : {}), ...(body ? { 'content-type': body.contentType, 'content-length': String(body.body.length) } : {}), ...headers },
    body: stream,
    signal: new AbortController().signal,
  };
}

const filesBody = (files: Buffer[], fields: Record<string, string> = {}) =>
  multipartBody([
    ...Object.entries(fields).map(([name, data]) => ({ name, data })),
    ...files.map((data, n) => ({ name: 'file', filename: `photo-${n}.png`, type: 'image/png', data })),
  ]);
const jsonBody = (value: unknown) => ({ body: Buffer.from(JSON.stringify(value)), contentType: 'application/json' });
const json = (response: CoreResponse) => JSON.parse(response.body.toString()) as Record<string, any>;

async function waitForEnd(handler: RemoveBgHandler, key: string, id: string, timeoutMs = 200_000): Promise<Record<string, any>> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const status = json(await handler.jobs!(coreRequest('GET', `/v1/jobs/${id}`, key)));
    if (['succeeded', 'failed', 'canceled'].includes(status.state)) return status;
    if (Date.now() > until) throw new Error(`job ${id} still ${status.state}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('a job through the in-process queue, end to end with the real model', () => {
  it('202 with Location; each image cut out (same size, with alpha), one failed image reported with its code; results one by one and as a ZIP; only done images charged', async () => {
    const handler = handlerWith();
    const corrupt = images[0]!.subarray(0, 200);
    const accepted = await handler.jobs!(coreRequest('POST', '/v1/jobs', metered, filesBody([images[0]!, corrupt, images[1]!], { format: 'png' })));
    expect(accepted.status).toBe(202);
    const { id, statusUrl } = json(accepted);
    expect(accepted.headers.location).toBe(`/v1/jobs/${id}`);
    expect(statusUrl).toBe(`/v1/jobs/${id}`);

    const status = await waitForEnd(handler, metered, id);
    expect(status.images.map((i: { state: string; error?: { code: string } }) => `${i.state}${i.error ? ` ${i.error.code}` : ''}`)).toEqual(['done', 'failed corrupt_image', 'done']);
    expect(status.state).toBe('succeeded');
    expect(status.progress).toEqual({ total: 3, done: 2, failed: 1, canceled: 0, fraction: 1 });

    for (const [n, source] of [[0, images[0]!], [2, images[1]!]] as const) {
      const result = await handler.jobs!(coreRequest('GET', `/v1/jobs/${id}/results/${n}`, metered));
      expect(result.status).toBe(200);
      expect(result.headers['content-type']).toBe('image/png');
      const [meta, input] = await Promise.all([sharp(result.body).metadata(), sharp(source).metadata()]);
      expect([meta.width, meta.height, meta.channels]).toEqual([input.width, input.height, 4]);
    }
    const failed = await handler.jobs!(coreRequest('GET', `/v1/jobs/${id}/results/1`, metered));
    expect([failed.status, json(failed).code]).toEqual([409, 'result_not_ready']);

    const zip = await handler.jobs!(coreRequest('GET', `/v1/jobs/${id}/results`, metered));
    expect(zip.headers['content-type']).toBe('application/zip');
    const entries = unzipSync(new Uint8Array(zip.body));
    expect(Object.keys(entries).sort()).toEqual(['0000-photo-0-nobg.png', '0002-photo-2-nobg.png']);

    const account = json(await handler.account(coreRequest('GET', '/v1/account', metered)));
    expect(account.quota.used).toBe(2);
    expect(account.usage.images).toBe(2);
  }, MODEL_TEST_MS);

  it('an Idempotency-Key retry of the same batch gets the same job; the key for another batch is 422', async () => {
    const handler = handlerWith();
    const send = (files: Buffer[]) => handler.jobs!(coreRequest('POST', '/v1/jobs', keys.good, filesBody(files), { 'idempotency-key': 'batch-1' }));
    const first = await send([images[2]!]);
    const again = await send([images[2]!]);
    expect(first.status).toBe(202);
    expect(again.status).toBe(202);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(json(again).id).toBe(json(first).id);
    const other = await send([images[1]!]);
    expect([other.status, json(other).code]).toEqual([422, 'idempotency_key_reused']);
    await waitForEnd(handler, keys.good, json(first).id);
  }, MODEL_TEST_MS);
});

describe('bad input: coded refusals, nothing queued', () => {
  it('an empty batch (a form with no file, or an empty image_urls list) is 400 batch_empty', async () => {
    const handler = handlerWith();
    const form = await handler.jobs!(coreRequest('POST', '/v1/jobs', keys.good, multipartBody([{ name: 'format', data: 'png' }])));
    expect([form.status, json(form).code]).toEqual([400, 'batch_empty']);
    const list = await handler.jobs!(coreRequest('POST', '/v1/jobs', keys.good, jsonBody({ image_urls: [] })));
    expect([list.status, json(list).code]).toEqual([400, 'batch_empty']);
  });

  it('more images than the plan allows is 400 batch_too_large (files and URLs alike)', async () => {
    const handler = handlerWith();
    const files = await handler.jobs!(coreRequest('POST', '/v1/jobs', batchOfTwo, filesBody([images[0]!, images[1]!, images[2]!])));
    expect([files.status, json(files).code]).toEqual([400, 'batch_too_large']);
    expect(json(files).detail).toContain('at most 2');
    const urls = await handler.jobs!(coreRequest('POST', '/v1/jobs', batchOfTwo, jsonBody({ image_urls: ['https://a.example/1.jpg', 'https://a.example/2.jpg', 'https://a.example/3.jpg'] })));
    expect([urls.status, json(urls).code]).toEqual([400, 'batch_too_large']);
  });

  it("an unknown job id and another account's job id get the same 404 job_not_found", async () => {
    const handler = handlerWith();
    const accepted = json(await handler.jobs!(coreRequest('POST', '/v1/jobs', keys.good, filesBody([images[2]!]))));
    const unknown = await handler.jobs!(coreRequest('GET', '/v1/jobs/00000000-0000-4000-8000-000000000000', keys.good));
    const foreign = await handler.jobs!(coreRequest('GET', `/v1/jobs/${accepted.id}`, metered));
    const foreignResult = await handler.jobs!(coreRequest('GET', `/v1/jobs/${accepted.id}/results/0`, metered));
    const foreignDelete = await handler.jobs!(coreRequest('DELETE', `/v1/jobs/${accepted.id}`, metered));
    for (const response of [unknown, foreign, foreignResult, foreignDelete]) {
      expect([response.status, json(response).code]).toEqual([404, 'job_not_found']);
      expect(response.body.toString()).toBe(unknown.body.toString());
    }
    expect((await waitForEnd(handler, keys.good, accepted.id)).state).toBe('succeeded');
  }, MODEL_TEST_MS);

  it("results after the plan's retention are 410 results_expired, and the sweep removes their files", async () => {
    const handler = handlerWith({ jobs: { resultsDir, sweepIntervalMs: 100 } });
    const { id } = json(await handler.jobs!(coreRequest('POST', '/v1/jobs', brief, filesBody([images[2]!]))));
    const status = await waitForEnd(handler, brief, id);
    expect(status.state).toBe('succeeded');
    await new Promise((r) => setTimeout(r, Date.parse(status.expiresAt) - Date.now() + 50));
    const late = await handler.jobs!(coreRequest('GET', `/v1/jobs/${id}/results/0`, brief));
    expect([late.status, json(late).code]).toEqual([410, 'results_expired']);
    const zip = await handler.jobs!(coreRequest('GET', `/v1/jobs/${id}/results`, brief));
    expect([zip.status, json(zip).code]).toEqual([410, 'results_expired']);
    await expect.poll(async () => (await readdir(resultsDir)).includes(id), { timeout: 5_000 }).toBe(false);
  }, MODEL_TEST_MS);
});

describe('webhooks (Standard Webhooks), loopback receiver', () => {
  it('a receiver that fails twice then succeeds gets the event on the third attempt, after the backoff, verified by standardwebhooks', async () => {
    const secrets = new MemoryWebhookSecretStore();
    const deliveries = new MemoryDeliveryLog();
    const secret = await secrets.rotate('acct_good');
    const received: { at: number; type: string; id: string; verified: unknown; status: number }[] = [];
    let completedCalls = 0;
    // The third job.completed attempt answered: the event this test waits on. The job's end does
    // not mean job.completed is scheduled yet (the runner stores the end first, then writes the
    // results' expiry, then sends the event), so webhooksIdle() right after waitForEnd could find
    // nothing in flight.
    const completedDelivered = signal();
    const receiver = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString();
        const verified = new Webhook(secret).verify(body, req.headers as Record<string, string>);
        const type = (verified as { type: string }).type;
        // job.completed fails twice; job.started is taken at once.
        const status = type === 'job.completed' && ++completedCalls <= 2 ? 503 : 204;
        received.push({ at: Date.now(), type, id: String(req.headers['webhook-id']), verified, status });
        res.writeHead(status).end();
        if (type === 'job.completed' && status === 204) completedDelivered.resolve();
      });
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    const port = (receiver.address() as AddressInfo).port;
    try {
      const handler = handlerWith({
        imageUrl: { allowLoopbackForTesting: true, allowedPorts: [80, 443, port] },
        jobs: { resultsDir, webhooks: { secrets, deliveries, retryDelaysMs: [150, 300] } },
      });
      const accepted = await handler.jobs!(
        coreRequest('POST', '/v1/jobs', keys.good, filesBody([images[2]!], { callback_url: `http://127.0.0.1:${port}/hooks?token=t0k3n` })),
      );
      expect(accepted.status).toBe(202);
      const { id } = json(accepted);
      await waitForEnd(handler, keys.good, id);
      await within(completedDelivered.promise, 60_000, () => received.map((r) => `${r.type} ${r.status}`).join(', ') || 'no request');
      // The sender's third attempt is still in flight until it has read the 204 and written the log.
      await handler.webhooksIdle();

      const completed = received.filter((r) => r.type === 'job.completed');
      expect(completed.map((r) => r.status)).toEqual([503, 503, 204]);
      expect(new Set(completed.map((r) => r.id))).toEqual(new Set([`msg_${id}_job.completed`]));
      expect(completed[1]!.at - completed[0]!.at).toBeGreaterThanOrEqual(140);
      expect(completed[2]!.at - completed[1]!.at).toBeGreaterThanOrEqual(290);
      expect((completed[2]!.verified as { data: { id: string; state: string } }).data).toMatchObject({ id, state: 'succeeded' });
      expect(received.filter((r) => r.type === 'job.started')).toHaveLength(1);

      const log = await deliveries.list('acct_good');
      const entry = log.find((d) => d.type === 'job.completed')!;
      expect(entry.state).toBe('delivered');
      expect(entry.attempts.map((a) => a.status)).toEqual([503, 503, 204]);
      expect(entry.url).toBe(`http://127.0.0.1:${port}/hooks`);
      const view = json(await handler.jobs!(coreRequest('GET', `/v1/jobs/${id}`, keys.good)));
      expect(JSON.stringify(view)).not.toContain('t0k3n');
      // The job's timeline, for the record: accepted -> started -> done -> each webhook attempt.
      const t0 = Date.parse(view.createdAt);
      const at = (iso: string | number) => `+${((typeof iso === 'number' ? iso : Date.parse(iso)) - t0).toString()} ms`;
      console.log(
        `job timeline: accepted ${view.createdAt}; started ${at(view.startedAt)}; done ${at(view.finishedAt)}; ` +
          received.map((r) => `${r.type} ${r.status} ${at(r.at)}`).join('; '),
      );
    } finally {
      receiver.close();
    }
  }, MODEL_TEST_MS);

  it('a callback_url whose name resolves to a private address is refused (422) before any connection', async () => {
    const secrets = new MemoryWebhookSecretStore();
    await secrets.rotate('acct_good');
    const lookups: string[] = [];
    const guard = guardConnections();
    try {
      const handler = handlerWith({
        imageUrl: { resolver: async (name) => (lookups.push(name), [{ address: '10.1.2.3', family: 4 }]) },
        jobs: { resultsDir, webhooks: { secrets } },
      });
      for (const url of ['https://hooks.internal.test/in', 'http://169.254.169.254/latest', 'http://[::ffff:192.168.0.1]/x', 'ftp://hooks.test/x', 'https://hooks.test:8443/x']) {
        const refused = await handler.jobs!(coreRequest('POST', '/v1/jobs', keys.good, filesBody([images[2]!], { callback_url: url })));
        expect([url, refused.status, json(refused).code]).toEqual([url, 422, 'callback_url_refused']);
      }
      expect(lookups).toEqual(['hooks.internal.test']);
      expect(guard.attempts).toEqual([]);
    } finally {
      guard.restore();
    }
  });

  it('a callback needs the account to have a signing secret: 409 webhook_secret_missing', async () => {
    const handler = handlerWith({
      imageUrl: { resolver: async () => [{ address: '93.184.216.34', family: 4 }] },
      jobs: { resultsDir, webhooks: { secrets: new MemoryWebhookSecretStore() } },
    });
    const refused = await handler.jobs!(coreRequest('POST', '/v1/jobs', keys.good, filesBody([images[2]!], { callback_url: 'https://hooks.example.test/in' })));
    expect([refused.status, json(refused).code]).toEqual([409, 'webhook_secret_missing']);
  });
});
