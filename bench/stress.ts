/**
 * npm run stress [-- --only fuzz,storm,slow,redis,inference,sigterm] [--fuzz 100000] [--model-fuzz 40]
 *                   [--storm 1000] [--slow 200] [--seed N] [--json out.json]
 *
 * The long version of the suite that tries to break the API (the short one is in npm test):
 * - fuzz: fast-check cases (multipart bodies, header sets, options, mutated images) straight into
 *   the core handler; every answer a defined status with a problem+json body, no 500, no hang;
 * - storm: requests dropped at random points (headers, mid-upload, waiting for a slot, during
 *   inference) against an API process; afterwards in-flight, slots, pixels and the account's
 *   in-progress count are 0, its open file descriptors and RSS back near idle, and no inference
 *   ran for a request already gone (the inference server's session.run count);
 * - slow: 200 connections sending a byte a second; p99 of normal cutouts against unloaded,
 *   and the slow uploads cut at the (short) upload timeout;
 * - redis: Redis paused (DEBUG SLEEP) and killed under load, Redis-backed limits;
 * - inference: the inference server killed and restarted under load;
 * - sigterm: SIGTERM to an API process under load.
 * Bounded: every section has a fixed count and a deadline. Loopback only. Prints a summary and
 * exits non-zero when a check fails.
 */
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import net from 'node:net';
import { parseArgs } from 'node:util';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { FileKeyStore } from '../src/core/index.js';
import { abortStorm, holdings, inferenceRuns, settle } from '../test/helpers/abort-storm.js';
import { startApiProcess, type ApiProcess } from '../test/helpers/api-process.js';
import {
  createFuzzKeys,
  fuzzHandler,
  headerCases,
  imageCases,
  multipartCases,
  newStats,
  optionCases,
  runCase,
  seedImages,
  type FuzzCase,
} from '../test/helpers/fuzz.js';
import { startInferenceProcess, type InferenceProcess } from '../test/helpers/inference-process.js';
import { startLoad, tally, type Answer } from '../test/helpers/load.js';
import { startRedis } from '../test/helpers/redis-server.js';
import { photoForm } from '../test/helpers/stress-app.js';

const { values } = parseArgs({
  options: {
    only: { type: 'string', default: 'fuzz,storm,slow,redis,inference,sigterm' },
    fuzz: { type: 'string', default: '100000' },
    'model-fuzz': { type: 'string', default: '40' },
    storm: { type: 'string', default: '1000' },
    slow: { type: 'string', default: '200' },
    seed: { type: 'string' },
    json: { type: 'string' },
  },
});
const sections = new Set(values.only!.split(','));
const seed = values.seed ? Number(values.seed) : Date.now() % 2 ** 31;
const report: Record<string, unknown> = { seed, machine: `${os.availableParallelism()} cores (shared), Node ${process.version}` };
const failures: string[] = [];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mb = (bytes: number) => Math.round(bytes / 2 ** 20);
function check(ok: boolean, what: string): void {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures.push(what);
}
function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? NaN;
}

const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-stress-'));
const keysFile = path.join(dir, 'keys.json');
const store = new FileKeyStore({ file: keysFile, reloadIntervalMs: 0 });
const key = (await store.createKey({ accountId: 'acct_stress', plan: 'storm' })).key;
const form = await photoForm();

let inference: InferenceProcess = await startInferenceProcess(['--metrics-port', '0']);
const apiEnv = (extra: Record<string, string> = {}) => ({ STRESS_KEYS_FILE: keysFile, STRESS_INFERENCE: inference.address, ...extra });
const apiHoldings = async (api: ApiProcess) => holdings(await (await fetch(`${api.baseUrl}/metrics`)).text());
async function inProgress(api: ApiProcess): Promise<number> {
  const body = (await (await fetch(`${api.baseUrl}/v1/account`, { headers: { 'x-api-key': key } })).json()) as { inProgress?: number };
  return body.inProgress ?? NaN;
}
async function cutout(api: ApiProcess): Promise<{ status: number; ms: number }> {
  const started = performance.now();
  const response = await fetch(`${api.baseUrl}/v1/remove-bg`, { method: 'POST', headers: { 'x-api-key': key, 'content-type': form.contentType }, body: form.body });
  await response.arrayBuffer();
  return { status: response.status, ms: performance.now() - started };
}

try {
  if (sections.has('fuzz')) await fuzz();
  if (sections.has('storm')) await storm();
  if (sections.has('slow')) await slowClients();
  if (sections.has('redis')) await redisFaults();
  if (sections.has('sigterm')) await sigterm();
  if (sections.has('inference')) await inferenceFault();
} finally {
  await inference.stop();
}

console.log(JSON.stringify(report, null, 2));
if (values.json) await writeFile(values.json, JSON.stringify(report, null, 2));
if (failures.length > 0) {
  console.error(`stress: ${failures.length} check(s) failed:\n- ${failures.join('\n- ')}`);
  process.exitCode = 1;
}

// -------------------------------------------------------------------------------------------

async function fuzz(): Promise<void> {
  const total = Number(values.fuzz);
  const modelCases = Number(values['model-fuzz']);
  const keys = await createFuzzKeys();
  const images = await seedImages();
  const stats = newStats();
  const handler = fuzzHandler(keys, inference.address, stats);
  await handler.ready();
  const started = performance.now();
  const plan: [string, () => fc.Arbitrary<FuzzCase>, number, number][] = [
    ['multipart', () => multipartCases(keys, images), Math.round(total * 0.4), 10_000],
    ['headers', () => headerCases(keys, images), Math.round(total * 0.25), 10_000],
    ['options', () => optionCases(keys, images), Math.round(total * 0.2), 10_000],
    ['image', () => imageCases(keys, images, false), Math.round(total * 0.15), 10_000],
    ['image+model', () => imageCases(keys, images, true), modelCases, 120_000],
  ];
  for (const [name, arb, numRuns, hangMs] of plan) {
    const t = performance.now();
    try {
      await fc.assert(
        fc.asyncProperty(arb(), (c) => runCase(handler, c, stats, hangMs)),
        { numRuns, seed },
      );
      check(true, `fuzz ${name}: ${numRuns} cases in ${((performance.now() - t) / 1000).toFixed(0)} s`);
    } catch (error) {
      check(false, `fuzz ${name}: ${(error as Error).message.slice(0, 2000)}`);
    }
  }
  const metricsText = (await handler.metrics({ method: 'GET', url: '/metrics', headers: {}, body: undefined as never, signal: new AbortController().signal })).body.toString();
  const left = holdings(metricsText);
  check(stats.internalErrors.length === 0, `fuzz: no internal error reported (${stats.internalErrors.length}: ${stats.internalErrors.slice(0, 3).map(String).join('; ')})`);
  check(left.inFlight === 0 && left.slots === 0 && left.pixels === 0, `fuzz: nothing held afterwards ${JSON.stringify(left)}`);
  await handler.close();
  report.fuzz = { cases: stats.cases, reachedModel: stats.inferred, seconds: Math.round((performance.now() - started) / 1000), byKind: stats.byKind, byStatus: stats.byStatus };
}

async function storm(): Promise<void> {
  const requests = Number(values.storm);
  const api = await startApiProcess(apiEnv({ STRESS_MAX_INFERENCES: '2' }));
  try {
    const warm = await cutout(api);
    const second = await cutout(api);
    check(warm.status === 200 && second.status === 200, 'storm: warm-up cutouts answered 200');
    await sleep(1000);
    const idle = { rss: api.rss(), fds: api.fds() };
    const runsBefore = await inferenceRuns(inference.metricsUrl!);
    const started = performance.now();
    const result = await abortStorm({
      baseUrl: api.baseUrl,
      path: '/v1/remove-bg',
      key,
      body: form.body,
      contentType: form.contentType,
      requests,
      concurrency: 32,
      inferenceAbortMs: 1.5 * second.ms,
    });
    const stormSeconds = (performance.now() - started) / 1000;
    const peak = { rss: api.rss(), fds: api.fds() };
    const held = await settle(() => apiHoldings(api), (h) => h.inFlight === 0 && h.slots === 0 && h.slotWaiters === 0 && h.pixels === 0, 120_000);
    const progress = await settle(() => inProgress(api), (n) => n === 0, 30_000);
    const runs = (await inferenceRuns(inference.metricsUrl!)) - runsBefore;
    // Give sockets in TIME_WAIT/closing and the allocator a moment, as an idle server would have.
    await sleep(3000);
    const after = { rss: api.rss(), fds: api.fds() };
    const owed = (result.answered['200'] ?? 0) + result.droppedAfterUpload.inference;
    report.storm = {
      requests,
      seconds: Math.round(stormSeconds),
      sent: result.sent,
      answeredBeforeDrop: result.answered,
      droppedAfterUpload: result.droppedAfterUpload,
      afterwards: { ...held, accountInProgress: progress },
      inferencesRun: runs,
      inferencesOwedAtMost: owed,
      fds: `${idle.fds} idle -> ${peak.fds} at the end of the storm -> ${after.fds} after`,
      rssMiB: `${mb(idle.rss)} idle -> ${mb(peak.rss)} -> ${mb(after.rss)} after`,
    };
    check(held.inFlight === 0 && held.slots === 0 && held.slotWaiters === 0 && held.pixels === 0, `storm: nothing held afterwards ${JSON.stringify(held)}`);
    check(progress === 0, `storm: the account's in-progress count back to 0 (${progress})`);
    check(runs <= owed, `storm: inferences run (${runs}) <= answered cutouts + requests dropped while possibly in inference (${owed})`);
    check(after.fds <= idle.fds + 5, `storm: open file descriptors ${idle.fds} -> ${after.fds}`);
    check(after.rss <= idle.rss + 150 * 2 ** 20, `storm: RSS back near idle (${mb(idle.rss)} -> ${mb(after.rss)} MiB)`);
  } finally {
    await api.stop();
  }
}

async function slowClients(): Promise<void> {
  const connections = Number(values.slow);
  const uploadTimeoutMs = 5_000;
  const api = await startApiProcess(apiEnv({ STRESS_UPLOAD_TIMEOUT_MS: String(uploadTimeoutMs), STRESS_MAX_INFERENCES: '1' }));
  const samples = 8;
  const accountSamples = 200;
  /** Normal requests: cutouts (the model dominates) and GET /v1/account (the API alone). */
  const measure = async () => {
    const cutouts: number[] = [];
    const statuses: number[] = [];
    const accounts: number[] = [];
    for (let i = 0; i < samples; i++) {
      const r = await cutout(api);
      cutouts.push(r.ms);
      statuses.push(r.status);
      for (let j = 0; j < accountSamples / samples; j++) {
        const t = performance.now();
        const response = await fetch(`${api.baseUrl}/v1/account`, { headers: { 'x-api-key': key } });
        await response.arrayBuffer();
        statuses.push(response.status);
        accounts.push(performance.now() - t);
      }
    }
    return { cutouts, accounts, statuses };
  };
  try {
    await cutout(api);
    const before = await measure();

    const url = new URL(api.baseUrl);
    const head = `POST /v1/remove-bg HTTP/1.1\r\nHost: ${url.host}\r\nX-API-KEY: ${key}\r\nContent-Type: ${form.contentType}\r\nContent-Length: ${form.body.length}\r\n\r\n`;
    const slow: { status: string; ms: number }[] = [];
    let running = true;
    const open = new Set<net.Socket>();
    const slowOne = () =>
      new Promise<void>((resolve) => {
        const socket = net.connect(Number(url.port), url.hostname);
        open.add(socket);
        const started = performance.now();
        let answer = '';
        let sent = 0;
        socket.on('error', () => {});
        // The answer (a 408, on a connection the server may keep open): record it and hang up.
        socket.on('data', (c: Buffer) => {
          answer += c.toString('latin1');
          if (/^HTTP\/1\.1 \d{3}/.test(answer)) socket.destroy();
        });
        socket.once('connect', () => socket.write(head));
        // One byte of the body a second.
        const drip = setInterval(() => {
          if (sent < form.body.length && socket.writable) socket.write(form.body.subarray(sent, ++sent));
        }, 1000);
        socket.once('close', () => {
          clearInterval(drip);
          open.delete(socket);
          slow.push({ status: /^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? 'closed', ms: performance.now() - started });
          resolve();
        });
      });
    const keepSlow = async () => {
      while (running) await slowOne();
    };
    const slowLoops = Array.from({ length: connections }, keepSlow);
    await sleep(2000);
    const during = await measure();
    // Let every slow upload of this round reach the timeout.
    await sleep(uploadTimeoutMs + 1000);
    running = false;
    await Promise.race([Promise.all(slowLoops), sleep(uploadTimeoutMs + 5000)]);
    for (const socket of open) socket.destroy();
    const after = await measure();
    const cut = slow.filter((s) => s.status === '408');
    // Unloaded: the runs before and after the slow clients, so drift in the machine's load is shared.
    const unloaded = [...before.cutouts, ...after.cutouts];
    const unloadedAccount = [...before.accounts, ...after.accounts];
    const summary = (xs: number[]) => ({ p50: Math.round(percentile(xs, 50)), p99: Math.round(percentile(xs, 99)) });
    const p99ratio = percentile(during.cutouts, 99) / percentile(unloaded, 99);
    const accountRatio = percentile(during.accounts, 99) / percentile(unloadedAccount, 99);
    const loadedStatuses = during.statuses;
    report.slowClients = {
      connections,
      uploadTimeoutMs,
      cutoutMs: { unloaded: summary(unloaded), withSlowClients: summary(during.cutouts) },
      accountMs: { unloaded: summary(unloadedAccount), withSlowClients: summary(during.accounts) },
      p99Ratio: Number(p99ratio.toFixed(2)),
      p50Ratio: Number((percentile(during.cutouts, 50) / percentile(unloaded, 50)).toFixed(2)),
      accountP99Ratio: Number(accountRatio.toFixed(2)),
      slowUploads: slow.length,
      slowAnswers: Object.fromEntries([...new Set(slow.map((s) => s.status))].map((s) => [s, slow.filter((x) => x.status === s).length])),
      slowCutAfterMs: { min: Math.round(Math.min(...cut.map((s) => s.ms))), max: Math.round(Math.max(...cut.map((s) => s.ms))) },
    };
    check(loadedStatuses.every((s) => s === 200), `slow clients: normal requests served (${loadedStatuses.filter((s) => s !== 200).length} not 200)`);
    check(p99ratio <= 1.5, `slow clients: p99 of cutouts ${p99ratio.toFixed(2)}x unloaded (<= 1.5)`);
    check(accountRatio <= 1.5, `slow clients: p99 of GET /v1/account ${accountRatio.toFixed(2)}x unloaded (<= 1.5)`);
    check(cut.length >= connections && slow.every((s) => s.status === '408'), `slow clients: slow uploads answered 408 (${JSON.stringify(report.slowClients)})`);
    check(cut.every((s) => s.ms >= uploadTimeoutMs - 100 && s.ms <= uploadTimeoutMs + 3000), 'slow clients: cut at the upload timeout');
  } finally {
    await api.stop();
  }
}

/** What clients saw for the requests they sent in each window of a fault run. */
function windowed(answers: Answer[], windows: [string, number, number][]): Record<string, Record<string, number>> {
  return Object.fromEntries(windows.map(([name, from, to]) => [name, tally(answers.filter((a) => a.sentAt >= from && a.sentAt < to))]));
}

async function redisFaults(): Promise<void> {
  const redisServer = await startRedis({ debugCommand: true });
  const api = await startApiProcess(apiEnv({ STRESS_REDIS_URL: redisServer.url, STRESS_MAX_INFERENCES: '2' }));
  const admin = new Redis(redisServer.port, '127.0.0.1', { maxRetriesPerRequest: 0, retryStrategy: () => 200 });
  admin.on('error', () => {});
  const windows: [string, number, number][] = [];
  try {
    await cutout(api);
    const load = startLoad({ url: `${api.baseUrl}/v1/remove-bg`, key, ...form, workers: 4 });
    // Cheap requests too, so that faults also land on admission and GET /v1/account.
    const cheap = startLoad({ url: `${api.baseUrl}/v1/remove-bg`, key, body: Buffer.from('x'), contentType: 'text/plain', workers: 2 });
    await sleep(3000);
    windows.push(['before', 0, load.now()]);
    // Pauses at random points of the request path.
    for (let i = 0; i < 6; i++) {
      await sleep(Math.random() * 1500);
      const from = load.now();
      await admin.call('DEBUG', 'SLEEP', '2').catch(() => {});
      windows.push([`paused 2 s #${i + 1}`, from, load.now() + 500]);
    }
    // Kills, each followed by a restart (empty: Redis runs without persistence here).
    for (let i = 0; i < 3; i++) {
      await sleep(500 + Math.random() * 2000);
      const from = load.now();
      await redisServer.stop();
      await sleep(2000);
      await redisServer.restart();
      windows.push([`killed 2 s #${i + 1}`, from, load.now() + 1000]);
    }
    const recoveredFrom = load.now();
    await sleep(15000);
    windows.push(['after', recoveredFrom, load.now()]);
    const answers = await load.stop();
    const cheapAnswers = await cheap.stop();
    const held = await settle(() => apiHoldings(api), (h) => h.inFlight === 0 && h.slots === 0 && h.pixels === 0, 60_000);
    const started = performance.now();
    const progress = await settle(() => inProgress(api), (n) => n === 0, 60_000);
    const tail = windowed(answers, windows.slice(-1))['after']!;
    report.redis = {
      cutouts: windowed(answers, windows),
      cheapRequests: windowed(cheapAnswers, windows),
      afterwards: { ...held, accountInProgress: progress, inProgressZeroAfterMs: Math.round(performance.now() - started) },
    };
    const all = tally([...answers, ...cheapAnswers]);
    check(!Object.keys(all).some((s) => s.startsWith('500') || s === 'error'), `redis: no 500 and no dropped connection (${JSON.stringify(all)})`);
    check((tail['200'] ?? 0) > 0 && Object.keys(tail).every((s) => s === '200'), `redis: cutouts served again after Redis returned (${JSON.stringify(tail)})`);
    check(held.inFlight === 0 && held.slots === 0, `redis: nothing held afterwards (${JSON.stringify(held)})`);
    check(progress === 0, `redis: the account's in-progress count back to 0 (${progress})`);
  } finally {
    admin.disconnect();
    await api.stop();
    await redisServer.stop();
  }
}

async function sigterm(): Promise<void> {
  const api = await startApiProcess(apiEnv({ STRESS_MAX_INFERENCES: '2' }));
  await cutout(api);
  // Few enough in flight that they drain within the handler's shutdownTimeoutMs (30 s) on a busy box.
  const load = startLoad({ url: `${api.baseUrl}/v1/remove-bg`, key, ...form, workers: 4 });
  const before = await settle(() => apiHoldings(api), (h) => h.inFlight >= 3, 60_000);
  const at = load.now();
  api.child.kill('SIGTERM');
  const exit = await Promise.race([api.exited, sleep(60_000).then(() => 'timeout' as const)]);
  const exitedAfterMs = Math.round(load.now() - at);
  const answers = await load.stop();
  const drained = answers.filter((a) => a.sentAt < at && a.at > at);
  const after = answers.filter((a) => a.sentAt >= at);
  report.sigterm = { inFlightAtSignal: before.inFlight, inFlightAnswered: tally(drained), sentAfterSignal: tally(after), exit, exitedAfterMs };
  check(drained.length >= before.inFlight && drained.every((a) => a.status === 200), `sigterm: requests in flight finished (${JSON.stringify(tally(drained))})`);
  check(after.every((a) => (a.status === 503 && a.code === 'service_unavailable') || a.status === 'error'), `sigterm: new requests got 503 (${JSON.stringify(tally(after))})`);
  check(exit === 0, `sigterm: exited 0 (${exit})`);
  await api.stop();
}

async function inferenceFault(): Promise<void> {
  const api = await startApiProcess(apiEnv({ STRESS_MAX_INFERENCES: '2' }));
  try {
    await cutout(api);
    const load = startLoad({ url: `${api.baseUrl}/v1/remove-bg`, key, ...form, workers: 4 });
    await sleep(5000);
    const killedAt = load.now();
    inference.child.kill('SIGKILL');
    await new Promise<void>((resolve) => (inference.child.exitCode !== null || inference.child.signalCode !== null ? resolve() : inference.child.once('exit', () => resolve())));
    await sleep(3000);
    const restartAt = load.now();
    inference = await startInferenceProcess(['--port', String(inference.port), '--metrics-port', '0']);
    const readyAt = load.now();
    const firstOk = await settle(async () => load.answers.some((a) => a.status === 200 && a.sentAt > readyAt), (ok) => ok, 60_000);
    await sleep(5000);
    const answers = await load.stop();
    const held = await settle(() => apiHoldings(api), (h) => h.inFlight === 0 && h.slots === 0 && h.pixels === 0, 60_000);
    const inFlightAtKill = tally(answers.filter((a) => a.sentAt < killedAt && a.at > killedAt));
    const firstOkAfterReady = answers.filter((a) => a.status === 200 && a.sentAt > readyAt).map((a) => Math.round(a.at - readyAt))[0];
    report.inference = {
      inFlightAtKill,
      whileDown: tally(answers.filter((a) => a.sentAt >= killedAt && a.sentAt < readyAt)),
      restartTookMs: Math.round(readyAt - restartAt),
      afterRestart: tally(answers.filter((a) => a.sentAt >= readyAt)),
      firstOkAfterReadyMs: firstOkAfterReady,
      afterwards: held,
    };
    const all = tally(answers);
    check(!Object.keys(all).some((s) => s.startsWith('500') || s === 'error'), `inference: no 500 and no dropped connection (${JSON.stringify(all)})`);
    check(firstOk, 'inference: cutouts served again after the restart');
    check(held.inFlight === 0 && held.slots === 0, `inference: nothing held afterwards (${JSON.stringify(held)})`);
  } finally {
    await api.stop();
  }
}
