/**
 * The `host` bench section: what bgcut's work does to the process that mounts it. While clients
 * keep posting photos to a fresh API process (2 clients x the 24 MP photo, then 8 clients x the
 * ~1 MP one), a sampler asks a cheap route of the same process (`GET /v1/models`) and, alongside,
 * a control: a plain node:http server in a process of its own, under the same machine load.
 * Reported per load and output (png, jpg on a colour, quality=best, response=json):
 * - the cheap route's p50/p99/max latency, the control's, and p99 API - p99 control;
 * - the API process's event-loop delay (monitorEventLoopDelay, from host-probe.ts): its largest
 *   value is the longest block; and the control's, measured alike. On a loaded machine a process
 *   can wait tens of ms for a core with nothing blocking its loop: the control's longest delay is
 *   that floor, and the API's above it is the API's own.
 * `--compare DIR` runs the same against another build (e.g. main's), one after the other per cell.
 * `--host-attribution DIR`: each API process also runs V8's sampling profiler (host-probe.ts), one
 * profile per cell, and each row names what ran in the API's longest stretches without returning
 * to the loop (bench/block-attribution.ts): blocks found by attribution, not by wall time alone,
 * since on a loaded machine a delay can be a wait for a core. The profiler slows the API: use it
 * for where the time goes, not for the figures. `--host-loads 24mp` or `1mp` runs one load.
 * `--host-perf DIR`: each API's main thread is also recorded by Linux `perf` (cpu-clock and
 * epoll_pwait events), and a table after the run lists, per cell, its event-loop turns that took
 * the most CPU and what that CPU ran (bench/perf-turns.ts): a sample there counts only while the
 * thread is on a CPU, so a turn's CPU against its wall length tells its own work from a wait for
 * a core, which V8's sampling profiler cannot (it counts a thread asleep inside a collection, or
 * running in slices between other processes, as running).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, readFile } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { longestBlocks, type Block, type CpuProfile } from './block-attribution.js';
import { readSamples, turns, type Turn } from './perf-turns.js';

export interface HostApi {
  child: ChildProcess;
  url: string;
  stop: () => Promise<void>;
}

export interface HostBenchOptions {
  /** Starts an API process (this build, or `build`) with extra node arguments and environment. */
  startApi: (extraEnv: Record<string, string>, nodeArgs: string[], build?: string) => Promise<HostApi>;
  key: string;
  photo: Buffer;
  large: Buffer;
  compare?: string | undefined;
  /** Requests per client in each cell. */
  requestsPerClient: number;
  /** A folder for per-cell CPU profiles of the API processes: rows then attribute their longest blocks. */
  attribution?: string | undefined;
  /** Which loads to run (default both). */
  loads?: ('24mp' | '1mp')[] | undefined;
  /** A folder for `perf` recordings of the API processes' main threads: a table of each cell's costliest turns follows. */
  perf?: string | undefined;
}

/** CLOCK_MONOTONIC in ms, the clock of `perf record -k mono`. */
const monotonicMs = () => Number(process.hrtime.bigint()) / 1e6;

export const HOST_OUTPUTS: { name: string; query: string; json?: boolean }[] = [
  { name: 'png', query: '' },
  { name: 'jpg on a colour', query: 'format=jpg&bg_color=%2320c85a' },
  { name: 'best', query: 'quality=best' },
  { name: 'response=json', query: '', json: true },
];

export interface HostRow {
  build: string;
  load: string;
  output: string;
  requests: number;
  errors: number;
  cheapRoute: { p50Ms: number; p99Ms: number; maxMs: number; samples: number };
  control: { p50Ms: number; p99Ms: number; maxMs: number; samples: number };
  p99OverControlMs: number;
  eventLoop: { maxMs: number; p99Ms: number; p50Ms: number };
  controlEventLoop: { maxMs: number; p99Ms: number; p50Ms: number };
  /** With `attribution`: the API's longest blocks in this cell and what ran in them. */
  blocks?: Block[];
  /** With `attribution`: the API's main-thread garbage collections in this cell (host-probe.ts). */
  gc?: GcFigures;
  /** The measured part of the cell on CLOCK_MONOTONIC (ms), for `perf`. */
  window: { fromMs: number; toMs: number };
  /** With `perf`: the cell's turns that took the most CPU. */
  turns?: Turn[];
}

type GcFigures = { count: number; major: number; ms: number; longest: { ms: number; kind: string; flags: string; externalMb: number }[] };

function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const rank = (p / 100) * (s.length - 1);
  const lo = Math.floor(rank);
  return s[lo]! + (s[Math.min(s.length - 1, lo + 1)]! - s[lo]!) * (rank - lo);
}
const round = (x: number) => Math.round(x * 10) / 10;
const summary = (xs: number[]) => ({ p50Ms: round(percentile(xs, 50)), p99Ms: round(percentile(xs, 99)), maxMs: round(Math.max(...xs)), samples: xs.length });

/** The control: a plain node:http server answering a small JSON, in a process of its own, with host-probe.ts preloaded. */
async function startControl(probe: string, probeFile: string): Promise<{ url: string; child: ChildProcess; stop: () => Promise<void> }> {
  const code = `const http = require('node:http');
const body = Buffer.from(JSON.stringify({ ok: true }));
const server = http.createServer((req, res) => { res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length }); res.end(body); });
server.listen(0, '127.0.0.1', () => console.log('port ' + server.address().port));`;
  const child = spawn(process.execPath, ['--import', probe, '-e', code], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, BGCUT_HOST_PROBE_FILE: probeFile } });
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.once('data', (chunk: Buffer) => resolve(Number(/port (\d+)/.exec(chunk.toString())![1])));
    child.once('exit', (c) => reject(new Error(`control exited with ${c}`)));
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return { url: `http://127.0.0.1:${port}/`, child, stop: () => (child.kill('SIGTERM'), exited) };
}

/** GET with a fresh connection each time (as a health check does), resolving with its latency in ms. */
function timedGet(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const request = http.get(url, { agent: false, timeout: 30_000 }, (response) => {
      response.resume();
      response.on('end', () => resolve(performance.now() - started));
    });
    request.on('error', reject);
    request.on('timeout', () => request.destroy(new Error('timeout')));
  });
}

async function post(url: string, key: string, image: Buffer, query: string, json: boolean): Promise<number> {
  const form = new FormData();
  form.append('file', new Blob([image], { type: 'image/jpeg' }), 'photo.jpg');
  const response = await fetch(query ? `${url}?${query}` : url, { method: 'POST', headers: { 'x-api-key': key, ...(json ? { accept: 'application/json' } : {}) }, body: form });
  await response.arrayBuffer();
  return response.status;
}

/** The event-loop figures host-probe.ts wrote since the last signal (then it starts again). */
type ProbeFigures = { maxMs: number; p99Ms: number; p50Ms: number; profile?: string; gc?: GcFigures };
async function readProbe(child: ChildProcess, file: string): Promise<ProbeFigures> {
  const before = await readFile(file, 'utf8').catch(() => '');
  child.kill('SIGUSR2');
  for (let i = 0; i < 200; i++) {
    await new Promise((r) => setTimeout(r, 10));
    const text = await readFile(file, 'utf8').catch(() => '');
    if (text && text !== before) return JSON.parse(text) as ProbeFigures;
  }
  throw new Error('host probe did not answer');
}

/** One cell: the load runs to its end while the sampler asks both cheap routes every 20 ms. */
async function cell(api: HostApi, probeFile: string, control: { url: string; child: ChildProcess; file: string }, key: string, image: Buffer, clients: number, perClient: number, output: (typeof HOST_OUTPUTS)[number]) {
  const cheap = api.url.replace(/\/v1\/remove-bg$/, '/v1/models');
  // One unmeasured request of this kind first (JIT, caches), then the figures start.
  await post(api.url, key, image, output.query, Boolean(output.json));
  await readProbe(api.child, probeFile);
  await readProbe(control.child, control.file);
  const fromMs = monotonicMs();
  let done = false;
  let errors = 0;
  let requests = 0;
  const apiTimes: number[] = [];
  const controlTimes: number[] = [];
  const sampler = (async () => {
    while (!done) {
      const [a, c] = await Promise.all([timedGet(cheap), timedGet(control.url)]);
      apiTimes.push(a);
      controlTimes.push(c);
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      for (let i = 0; i < perClient; i++) {
        const status = await post(api.url, key, image, output.query, Boolean(output.json));
        requests++;
        if (status !== 200) errors++;
      }
    }),
  );
  done = true;
  await sampler;
  const window = { fromMs, toMs: monotonicMs() };
  const { profile, gc, ...eventLoop } = await readProbe(api.child, probeFile);
  const { gc: _controlGc, ...controlEventLoop } = await readProbe(control.child, control.file);
  const blocks = profile ? longestBlocks(JSON.parse(await readFile(profile, 'utf8')) as CpuProfile, 3) : undefined;
  return { requests, errors, cheapRoute: summary(apiTimes), control: summary(controlTimes), eventLoop, controlEventLoop, window, ...(blocks ? { blocks } : {}), ...(gc ? { gc } : {}) };
}

export async function hostBench(options: HostBenchOptions): Promise<HostRow[]> {
  const probe = fileURLToPath(new URL('./host-probe.js', import.meta.url));
  if (options.attribution) await mkdir(options.attribution, { recursive: true });
  const controlFile = path.join(os.tmpdir(), `bgcut-host-probe-${process.pid}-control.json`);
  const started = await startControl(probe, controlFile);
  const control = { ...started, file: controlFile };
  const rows: HostRow[] = [];
  const builds: [string, string | undefined][] = [['this build', undefined], ...(options.compare ? [[options.compare, options.compare] as [string, string]] : [])];
  const loads = [
    { id: '24mp', name: '2 clients x 24 MP', clients: 2, image: options.large },
    { id: '1mp', name: '8 clients x 1 MP', clients: 8, image: options.photo },
  ].filter((l) => !options.loads || options.loads.includes(l.id as '24mp' | '1mp'));
  try {
    const apis = await Promise.all(
      builds.map(async ([name, build], i) => {
        const file = path.join(os.tmpdir(), `bgcut-host-probe-${process.pid}-${i}.json`);
        const env: Record<string, string> = { BGCUT_HOST_PROBE_FILE: file, ...(options.attribution ? { BGCUT_HOST_PROFILE_DIR: options.attribution } : {}) };
        return { name, file, api: await options.startApi(env, ['--import', probe], build) };
      }),
    );
    const recordings = options.perf ? await Promise.all(apis.map(({ api }) => recordMainThread(api.child.pid!, options.perf!))) : [];
    try {
      for (const load of loads) {
        for (const output of HOST_OUTPUTS) {
          // Builds one after the other, cell by cell, so both see the same machine load.
          for (const { name, file, api } of apis) {
            const r = await cell(api, file, control, options.key, load.image, load.clients, options.requestsPerClient, output);
            const row: HostRow = { build: name, load: load.name, output: output.name, ...r, p99OverControlMs: round(r.cheapRoute.p99Ms - r.control.p99Ms) };
            rows.push(row);
            printRow(row);
          }
        }
      }
    } finally {
      for (const { api } of apis) await api.stop();
    }
    // perf ends on its own with the thread it records.
    for (const [i, recording] of recordings.entries()) {
      await recording.ended;
      const all = turns(readSamples(recording.file), 1000 / PERF_HZ);
      for (const row of rows.filter((r) => r.build === apis[i]!.name)) {
        row.turns = all.filter((t) => t.startMs >= row.window.fromMs && t.startMs <= row.window.toMs).sort((a, b) => b.cpuMs - a.cpuMs).slice(0, 3);
      }
    }
    if (options.perf) printTurns(rows);
  } finally {
    await control.stop();
  }
  return rows;
}

const PERF_HZ = 2000;

/** `perf record` of one thread (a process's main thread: its pid), into `dir`. */
async function recordMainThread(pid: number, dir: string): Promise<{ file: string; ended: Promise<void> }> {
  await mkdir(dir, { recursive: true });
  const file = path.join(dir, `${pid}.perf.data`);
  const events = ['cpu-clock', 'syscalls:sys_enter_epoll_pwait', 'syscalls:sys_exit_epoll_pwait'].flatMap((e) => ['-e', e]);
  const perf = spawn('perf', ['record', '-k', 'mono', '-F', String(PERF_HZ), '-g', ...events, '-t', String(pid), '-o', file], { stdio: 'ignore' });
  const ended = new Promise<void>((resolve, reject) => {
    perf.once('error', reject);
    perf.once('exit', () => resolve());
  });
  // perf needs a moment to attach; what runs before it is the cell's unmeasured request anyway.
  await new Promise((r) => setTimeout(r, 1000));
  return { file, ended };
}

function printTurns(rows: HostRow[]): void {
  console.log(`\nhost, by perf: each cell's three event-loop turns of the API's main thread that took the most CPU (cpu-clock at ${PERF_HZ} Hz: counted only while the thread is on a CPU; wall - CPU is waiting, for a core or inside the turn)`);
  console.log('| build | load | output | CPU ms / wall ms of the turn | what the CPU ran (ms) |\n|---|---|---|---|---|');
  for (const r of rows) {
    for (const t of r.turns ?? []) console.log(`| ${r.build} | ${r.load} | ${r.output} | **${t.cpuMs}** / ${round(t.wallMs)} | ${t.ran.slice(0, 4).map(([what, ms]) => `${what} ${ms}`).join('; ')} |`);
  }
}

let printed = false;
function printRow(r: HostRow): void {
  if (!printed) {
    console.log('\nhost: the API process under load, a cheap route (GET /v1/models) beside a control process (plain node:http), and the API\'s event-loop delay');
    console.log('| build | load | output | requests (errors) | /v1/models p50 / p99 / max ms | control p50 / p99 / max ms | p99 - control p99 ms | API event loop: longest delay / p99 ms | control event loop: longest delay / p99 ms |');
    console.log('|---|---|---|---|---|---|---|---|---|');
    printed = true;
  }
  const c = r.cheapRoute;
  const k = r.control;
  console.log(
    `| ${r.build} | ${r.load} | ${r.output} | ${r.requests} (${r.errors}) | ${c.p50Ms} / ${c.p99Ms} / ${c.maxMs} | ${k.p50Ms} / ${k.p99Ms} / ${k.maxMs} | **${r.p99OverControlMs}** | **${r.eventLoop.maxMs}** / ${r.eventLoop.p99Ms} | ${r.controlEventLoop.maxMs} / ${r.controlEventLoop.p99Ms} |`,
  );
  // Attribution: the cell's longest blocks by the profile, each with what ran most in it.
  for (const b of r.blocks ?? []) {
    console.log(`|  | block | ${b.ms} ms wall, ${b.sampledMs} ms ran | ${b.self.map((f) => `${f.frame} ${f.ms}`).join('; ')} | ${b.stack.slice(-4).join(' > ')} | | | | |`);
  }
  if (r.gc) {
    const longest = r.gc.longest.map((g) => `${g.ms} ms ${g.kind} (${g.flags}, external ${g.externalMb} MB after)`).join('; ');
    console.log(`|  | gc | ${r.gc.count} collections, ${r.gc.major} major, ${r.gc.ms} ms | longest: ${longest} | | | | | |`);
  }
}
