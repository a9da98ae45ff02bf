/**
 * Scale run (issue 28; not part of `npm test`): 4 API processes and 2 inference servers sharing one
 * Redis Cluster on loopback (3 masters, each with a replica), all on this machine.
 *
 *   npm run scale:redis [-- --image photo.jpg] [--requests 100] [--failover-requests 100]
 *
 * 1. Shared rate limit: a plan of N = 30 requests a minute (burst 0); `--requests` (100) parallel
 *    requests spread round-robin over the 4 APIs. Exactly N must be answered 200 (the rest 429, or 503),
 *    and the account's quota and usage counters in Redis must equal the 200s.
 * 2. A master killed mid-run: another account (no practical rate limit) sends `--failover-requests`
 *    (100), 8 at a time over the 4 APIs; once a third have answered, the master that holds the
 *    account's quota counter is SIGKILLed; its replica takes over after cluster-node-timeout (2 s).
 *    Afterwards the quota counter (charged per cutout) and the usage counter (images) in Redis are
 *    compared with the 200s the clients saw: nothing lost (counter < 200s) or double-counted
 *    (counter > 200s). Requests refused while the slot had no master are counted by status.
 * Prints a JSON summary; exits 1 when a check fails.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { Cluster, Redis } from 'ioredis';
import { connectRedis, FileKeyStore } from '../src/core/index.js';
import { startRedisCluster } from '../test/helpers/redis-cluster.js';
import { startInferenceProcess, type InferenceProcess } from '../test/helpers/inference-process.js';
import { startApiProcess, type ApiProcess } from '../test/helpers/api-process.js';
import { objectOnTexture } from '../test/helpers/synthetic-image.js';
import { STRESS_PLANS } from '../test/helpers/stress-app.js';

const { values: args } = parseArgs({
  options: {
    image: { type: 'string' },
    requests: { type: 'string', default: '100' },
    'failover-requests': { type: 'string', default: '100' },
  },
});
const REQUESTS = Number(args.requests);
const FAILOVER_REQUESTS = Number(args['failover-requests']);
const N = STRESS_PLANS.scale!.requestsPerMinute;
const started = Date.now();
const log = (line: string) => console.error(`[${((Date.now() - started) / 1000).toFixed(1)} s] ${line}`);

const image = args.image ? await readFile(args.image) : (await objectOnTexture(320, 240)).bytes;
const boundary = '----bgcutScale';
const body = Buffer.concat([
  Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="photo.jpg"\r\nContent-Type: image/jpeg\r\n\r\n`),
  image,
  Buffer.from(`\r\n--${boundary}--\r\n`),
]);

/** Problem `code`s of the answers that were not 200, by status and code. */
const refusals: Record<string, number> = {};

async function post(api: ApiProcess, key: string): Promise<number> {
  try {
    const response = await fetch(`${api.baseUrl}/v1/remove-bg`, {
      method: 'POST',
      headers: { 'x-api-key': key, 'content-type': `multipart/form-data; boundary=${boundary}` },
      body,
      signal: AbortSignal.timeout(120_000),
    });
    const bytes = Buffer.from(await response.arrayBuffer());
    if (response.status !== 200) {
      const code = (/"code"\s*:\s*"([^"]+)"/.exec(bytes.toString('utf8')) ?? [])[1] ?? '?';
      refusals[`${response.status} ${code}`] = (refusals[`${response.status} ${code}`] ?? 0) + 1;
    }
    return response.status;
  } catch {
    return 0; // no answer (connection error, client timeout)
  }
}

const histogram = (statuses: number[]) => statuses.reduce<Record<string, number>>((h, s) => ((h[s] = (h[s] ?? 0) + 1), h), {});

/** Every key of the cluster whose name contains `part`, with its master's port. */
async function findKeys(cluster: Cluster, part: string): Promise<{ key: string; port: number }[]> {
  const found: { key: string; port: number }[] = [];
  for (const node of cluster.nodes('master') as Redis[]) {
    const keys = (await node.keys(`*${part}*`)) as string[];
    for (const key of keys) found.push({ key, port: node.options.port! });
  }
  return found;
}

async function counters(cluster: Cluster, accountId: string): Promise<{ quota: number; usageImages: number; quotaKey: string; usageKey: string }> {
  const keys = await findKeys(cluster, accountId);
  const quotaKey = keys.find((k) => k.key.endsWith(':quota'))?.key ?? '';
  const usageKey = keys.find((k) => /:usage:\d{4}-\d{2}$/.test(k.key))?.key ?? '';
  return {
    quotaKey,
    usageKey,
    quota: quotaKey ? Number(await cluster.get(quotaKey)) : 0,
    usageImages: usageKey ? Number(await cluster.hget(usageKey, 'images')) : 0,
  };
}

const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-scale-'));
const redisCluster = await startRedisCluster({ masters: 3, replicas: 1 });
const inference: InferenceProcess[] = [];
const apis: ApiProcess[] = [];
let failed = false;
try {
  log(`Redis Cluster up: ${redisCluster.ports.length} nodes`);
  const cluster = connectRedis(redisCluster.url) as Cluster;
  if (cluster.status !== 'ready') await new Promise((resolve) => cluster.once('ready', resolve));
  const keysFile = path.join(dir, 'keys.json');
  const store = new FileKeyStore({ file: keysFile, reloadIntervalMs: 0 });
  const suffix = Math.random().toString(36).slice(2, 8);
  const rateAccount = `acct_scale_${suffix}`;
  const failoverAccount = `acct_failover_${suffix}`;
  const rateKey = (await store.createKey({ accountId: rateAccount, plan: 'scale' })).key;
  const failoverKey = (await store.createKey({ accountId: failoverAccount, plan: 'scaleFailover' })).key;

  inference.push(...(await Promise.all([0, 1].map(() => startInferenceProcess(['--workers', '1'])))));
  log(`inference servers ready: ${inference.map((s) => s.address).join(', ')}`);
  const addresses = inference.map((s) => s.address).join(',');
  apis.push(
    ...(await Promise.all(
      [0, 1, 2, 3].map((i) =>
        startApiProcess({ STRESS_INFERENCE: addresses, STRESS_KEYS_FILE: keysFile, STRESS_REDIS_URL: redisCluster.url, STRESS_MAX_INFERENCES: '2', STRESS_FRAMEWORK: i % 2 ? 'fastify' : 'express' }),
      ),
    )),
  );
  log(`API processes up: ${apis.map((a) => a.baseUrl).join(', ')}`);

  // 1. The shared rate limit.
  const t1 = Date.now();
  const rateStatuses = await Promise.all(Array.from({ length: REQUESTS }, (_, i) => post(apis[i % apis.length]!, rateKey)));
  const rateSeconds = (Date.now() - t1) / 1000;
  await new Promise((r) => setTimeout(r, 1_000)); // usage is recorded just after the answer
  const rateCounters = await counters(cluster, rateAccount);
  const rate = {
    plan: `${N} per minute, burst 0`,
    refusals: { ...refusals },
    requests: REQUESTS,
    statuses: histogram(rateStatuses),
    admitted: rateStatuses.filter((s) => s === 200).length,
    quotaCounter: rateCounters.quota,
    usageImages: rateCounters.usageImages,
    seconds: rateSeconds,
  };
  log(`rate: ${JSON.stringify(rate)}`);
  // Refusals other than 429 (503: an instance's inference queue or Redis call gave up under load) are reported, not failures.
  if (rate.admitted !== N || rate.quotaCounter !== N || rate.usageImages !== N) failed = true;

  // 2. A master killed mid-run.
  for (const warm of [0, 1, 2, 3]) await post(apis[warm]!, failoverKey); // counters exist, so their master is known
  const before = await counters(cluster, failoverAccount);
  const quotaPort = (await findKeys(cluster, failoverAccount)).find((k) => k.key === before.quotaKey)!.port;
  const usagePort = (await findKeys(cluster, failoverAccount)).find((k) => k.key === before.usageKey)!.port;
  for (const code of Object.keys(refusals)) delete refusals[code];
  const statuses: number[] = [];
  let firstOkAfterKill: number | undefined;
  let next = 0;
  let killedAt: number | undefined;
  let killTime = 0;
  const t2 = Date.now();
  const worker = async () => {
    while (next < FAILOVER_REQUESTS) {
      const i = next++;
      const status = await post(apis[i % apis.length]!, failoverKey);
      statuses.push(status);
      if (killedAt !== undefined && status === 200 && firstOkAfterKill === undefined) firstOkAfterKill = Date.now();
      // While the slot has no primary, requests fail fast: pace them so the run sees the recovery.
      if (killedAt !== undefined && status !== 200) await new Promise((r) => setTimeout(r, 250));
      if (killedAt === undefined && statuses.length >= Math.floor(FAILOVER_REQUESTS / 3)) {
        killedAt = statuses.length;
        killTime = Date.now();
        redisCluster.processOnPort(quotaPort)!.kill('SIGKILL');
        log(`SIGKILL master ${quotaPort} (quota counter's slot) after ${killedAt} answers`);
      }
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  const failoverSeconds = (Date.now() - t2) / 1000;
  // Wait for the replica's promotion to be seen by the client, then read the counters.
  let after = { quota: 0, usageImages: 0, quotaKey: '', usageKey: '' };
  for (let tries = 0; tries < 100; tries++) {
    try {
      after = await counters(cluster, failoverAccount);
      if (after.quotaKey) break;
    } catch {
      /* slots moving */
    }
    await new Promise((r) => setTimeout(r, 300));
  }
  const admitted = statuses.filter((s) => s === 200).length + 4; // with the 4 warm-up requests
  const failover = {
    requests: FAILOVER_REQUESTS,
    statuses: histogram(statuses),
    killedAfterAnswers: killedAt,
    killedMasterPort: quotaPort,
    firstOkAfterKillSeconds: firstOkAfterKill ? (firstOkAfterKill - killTime) / 1000 : null,
    refusals: { ...refusals },
    usageCounterOnKilledMaster: usagePort === quotaPort,
    admittedWithWarmUp: admitted,
    quotaCounter: after.quota,
    usageImages: after.usageImages,
    lost: admitted - after.quota,
    doubleCounted: Math.max(0, after.quota - admitted),
    seconds: failoverSeconds,
  };
  log(`failover: ${JSON.stringify(failover)}`);
  if (after.quota !== admitted || after.usageImages !== admitted) failed = true;
  console.log(JSON.stringify({ rate, failover, loadAverage: os.loadavg().map((l) => l.toFixed(1)), totalSeconds: (Date.now() - started) / 1000, ok: !failed }, null, 2));
  cluster.disconnect();
} catch (error) {
  failed = true;
  console.error(error);
} finally {
  await Promise.all(apis.map((a) => a.stop()));
  await Promise.all(inference.map((s) => s.stop()));
  await redisCluster.stop();
  await rm(dir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
