import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import { Webhook } from 'standardwebhooks';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { FileKeyStore, RedisDeliveryLog, RedisWebhookSecretStore } from '../src/core/index.js';
import { startApiProcess, type ApiProcess } from './helpers/api-process.js';
import { multipartBody } from './helpers/fixtures.js';
import { recordIssuedKeys } from './helpers/log-capture.js';
import { objectOnTexture } from './helpers/synthetic-image.js';
import { useRedis } from './helpers/use-redis.js';

const INSTANCE = fileURLToPath(new URL('../dist/test/helpers/jobs-instance.js', import.meta.url));
const IMAGES = 20;
const ACCOUNT = 'acct_kill';

const redis = useRedis();
const instances: ApiProcess[] = [];
afterAll(async () => {
  await Promise.all(instances.map((i) => i.stop()));
});

interface Received {
  at: number;
  id: string;
  type: string;
  status: number;
  data: { id: string; state: string; progress: { done: number } };
}

/** A loopback receiver that verifies every delivery with `standardwebhooks`, and answers `answer(type)`. */
async function startReceiver(secret: string, answer: (type: string) => number) {
  const received: Received[] = [];
  const rejected: string[] = [];
  const listeners = new Set<() => void>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let event: { type: string; data: Received['data'] };
      try {
        event = new Webhook(secret).verify(Buffer.concat(chunks).toString(), req.headers as Record<string, string>) as typeof event;
      } catch (error) {
        rejected.push(String(error));
        res.writeHead(400).end();
        return;
      }
      const status = answer(event.type);
      received.push({ at: Date.now(), id: String(req.headers['webhook-id']), type: event.type, status, data: event.data });
      res.writeHead(status).end();
      for (const listener of listeners) listener();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    received,
    rejected,
    /** Resolves when `check` holds, re-checked on each delivery. */
    until(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => (listeners.delete(listener), reject(new Error(`timed out waiting for ${what}`))), timeoutMs);
        const listener = () => {
          if (!check()) return;
          clearTimeout(timer);
          listeners.delete(listener);
          resolve();
        };
        listeners.add(listener);
        listener();
      });
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

async function poll<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs: number, what: string): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value).slice(0, 300)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('a job survives the death of the instance running it (two API processes, one Redis)', () => {
  it('20 images, the running instance SIGKILLed midway: each image done and charged once, each event delivered once under one webhook-id', async () => {
    expect(existsSync(INSTANCE), 'npm run build first').toBe(true);
    const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-jobs-kill-'));
    const resultsDir = path.join(dir, 'results');
    const keysFile = path.join(dir, 'keys.json');
    const key = (await new FileKeyStore({ file: keysFile, reloadIntervalMs: 0 }).createKey({ accountId: ACCOUNT, plan: 'batch' })).key;
    recordIssuedKeys([key]);
    const secret = await new RedisWebhookSecretStore(redis.redis).rotate(ACCOUNT);

    // job.started is refused while the first instance lives: its retry, scheduled there, can only
    // succeed from the survivor (BullMQ's delayed job in Redis), which is what makes it durable.
    let killed = false;
    const receiver = await startReceiver(secret, (type) => (type === 'job.started' && !killed ? 503 : 204));
    const env = {
      JOBS_REDIS_URL: redis.server.url,
      JOBS_INFERENCE: inject('inferenceAddress'),
      JOBS_KEYS_FILE: keysFile,
      JOBS_RESULTS_DIR: resultsDir,
      JOBS_CALLBACK_PORT: String(receiver.port),
      JOBS_LOCK_MS: '4000',
      JOBS_RETRY_MS: Array.from({ length: 20 }, () => '1500').join(','),
    };
    const [a, b] = await Promise.all(['api-a', 'api-b'].map((name) => startApiProcess({ ...env, JOBS_WORKER_NAME: name }, INSTANCE)));
    instances.push(a!, b!);
    const byName: Record<string, ApiProcess> = { 'api-a': a!, 'api-b': b! };
    const bullmq = new Queue('bgcut-jobs', { connection: { host: '127.0.0.1', port: redis.server.port, maxRetriesPerRequest: null }, prefix: '{bgcut}' });
    try {
      const files = await Promise.all(Array.from({ length: IMAGES }, (_, n) => objectOnTexture(64 + 4 * n, 48 + 2 * n)));
      const form = multipartBody([
        { name: 'quality', data: 'fast' },
        { name: 'callback_url', data: `http://127.0.0.1:${receiver.port}/hooks` },
        ...files.map((f, n) => ({ name: 'file', filename: `p${n}.png`, type: 'image/png', data: f.bytes })),
      ]);
      const t0 = Date.now();
      const posted = await fetch(`${a!.baseUrl}/v1/jobs`, { method: 'POST', headers: { 'x-api-key': key, 'content-type': form.contentType }, body: form.body });
      expect(posted.status).toBe(202);
      const { id } = (await posted.json()) as { id: string };
      // Each change of the done count, as polled, for the timeline.
      const progress: { at: number; done: number }[] = [];
      const status = async (via: ApiProcess) => {
        const view = (await (await fetch(`${via.baseUrl}/v1/jobs/${id}`, { headers: { 'x-api-key': key } })).json()) as { state: string; progress: { done: number; failed: number }; createdAt: string; finishedAt: string | null };
        if (view.progress.done !== progress.at(-1)?.done) progress.push({ at: Date.now(), done: view.progress.done });
        return view;
      };

      // Which instance runs it, from BullMQ itself; killed once a few of its images are done.
      const runner = await poll(async () => (await bullmq.getJob(id))?.processedBy, (name) => name !== undefined, 60_000, 'a worker to take the job');
      const victim = byName[runner!]!;
      const survivor = victim === a ? b! : a!;
      const before = await poll(() => status(survivor), (s) => s.progress.done >= 3, 60_000, 'three images done');
      await receiver.until(() => receiver.received.some((r) => r.type === 'job.started'), 10_000, 'the first job.started attempt');
      victim.child.kill('SIGKILL');
      await victim.exited;
      killed = true;
      const killedAt = Date.now();
      expect(before.progress.done, 'killed midway, not after the end').toBeLessThan(IMAGES);

      const survivorName = victim === a ? 'api-b' : 'api-a';
      const tookOverAt = (await poll(async () => ((await bullmq.getJob(id))?.processedBy === survivorName ? Date.now() : 0), (t) => t > 0, 60_000, 'the survivor to take the job over')) as number;
      const end = await poll(() => status(survivor), (s) => s.state !== 'queued' && s.state !== 'running', 90_000, 'the job to end');
      await receiver.until(() => receiver.received.filter((r) => r.status === 204).length >= 2, 60_000, 'job.started and job.completed accepted');
      const tookOver = (await bullmq.getJob(id))?.processedBy;

      // Every image done once, its result there, nothing left over.
      expect(end.state).toBe('succeeded');
      expect(end.progress).toMatchObject({ done: IMAGES, failed: 0 });
      const stored = (await readdir(path.join(resultsDir, id))).sort();
      expect(stored.filter((f) => f.startsWith('out-'))).toHaveLength(IMAGES);
      expect(stored.filter((f) => f.startsWith('in-'))).toEqual([]);
      for (let n = 0; n < IMAGES; n++) {
        const result = await fetch(`${survivor.baseUrl}/v1/jobs/${id}/results/${n}`, { headers: { 'x-api-key': key } });
        expect([n, result.status, result.headers.get('content-type')]).toEqual([n, 200, 'image/png']);
        await result.arrayBuffer();
      }
      // Charged once per image, read back as the account sees it (the killed instance had reserved
      // the quota of the image it was running: the survivor's run of it is the same charge).
      const account = (await (await fetch(`${survivor.baseUrl}/v1/account`, { headers: { 'x-api-key': key } })).json()) as { usage: { images: number }; quota: { used: number } };
      expect({ usage: account.usage.images, quota: account.quota.used }).toEqual({ usage: IMAGES, quota: IMAGES });

      // Each event accepted once, under one webhook-id for all its attempts, every one verified.
      expect(receiver.rejected).toEqual([]);
      const accepted = receiver.received.filter((r) => r.status >= 200 && r.status < 300);
      expect(accepted.map((r) => [r.type, r.id]).sort()).toEqual([
        ['job.completed', `msg_${id}_job.completed`],
        ['job.started', `msg_${id}_job.started`],
      ]);
      const started = receiver.received.filter((r) => r.type === 'job.started');
      expect(new Set(started.map((r) => r.id)).size).toBe(1);
      expect(started.at(-1)!.at).toBeGreaterThan(killedAt); // the retry that succeeded came from the survivor
      expect(accepted.find((r) => r.type === 'job.completed')!.data).toMatchObject({ id, state: 'succeeded', progress: { done: IMAGES } });

      // The dashboard's deliveries list (the shared log): every attempt, from both instances. The
      // survivor writes an attempt there after it has read the receiver's answer, so the last 204
      // may reach the log a moment after the receiver saw its request: read until both have ended.
      const log = await poll(() => new RedisDeliveryLog(redis.redis).list(ACCOUNT), (l) => l.length === 2 && l.every((d) => d.state !== 'pending'), 30_000, 'both deliveries to end in the log');
      const startedLog = log.find((d) => d.type === 'job.started')!;
      expect(startedLog.state).toBe('delivered');
      expect(startedLog.attempts.at(-1)!.status).toBe(204);
      expect(startedLog.attempts.filter((x) => x.status === 503).length).toBeGreaterThanOrEqual(1);
      expect(startedLog.attempts.length).toBeLessThanOrEqual(started.length);
      expect(log.find((d) => d.type === 'job.completed')).toMatchObject({ state: 'delivered', attempts: [{ status: 204 }] });

      const at = (ms: number) => `+${ms - t0} ms`;
      console.log(
        `kill test: job ${id} run by ${runner}, SIGKILLed ${at(killedAt)} with ${before.progress.done}/${IMAGES} done; taken over by ${tookOver}; ` +
          `taken over ${at(tookOverAt)}; done count ${progress.map((p) => `${p.done} ${at(p.at)}`).join(', ')}; ` +
          `ended ${end.state} ${at(Date.parse(end.finishedAt!))}; usage ${account.usage.images} images, quota used ${account.quota.used}; ` +
          `webhooks: ${receiver.received.map((r) => `${r.type} ${r.status} ${at(r.at)}`).join(', ')}`,
      );
    } finally {
      await bullmq.close();
      await receiver.close();
    }
  }, 180_000);
});
