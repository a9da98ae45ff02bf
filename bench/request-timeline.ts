/**
 * The critical path of ONE request, step by step, as a GPU host sees it: the model made nearly
 * free, so what is left is the API's and the gRPC call's own time.
 *
 *   node dist/bench/request-timeline.js --image photo.jpg [--runs 15] [--warmup 5] [--compare other/dist] [--mask cache.bin] [--json out.json]
 *     [--pixel-threads N] [--render-bands N] [--compare-bands M] [--png-bands N] [--compare-png-bands M] [--load-clients 8 --load-rounds 3 --load-requests 40]
 *
 * The photo's real mask is made once by the real model (`isnet-int8`, one ModelInfer call on a
 * server started for it), then served by a "replay" model: an ONNX graph whose output is that
 * mask, stored as a constant, whatever the input (ISNet's input and output, UINT8). The API's
 * work downstream of the model is therefore the work of a real cutout of this photo, while
 * session.run costs a copy of 1 MiB, as on a GPU.
 *
 * The API (examples/express-app) and the inference server run as their own processes with an
 * OpenTelemetry tracer (test/helpers/otel-spans.ts) writing every span to a file; bgcut's spans
 * (src/tracing/otel.ts) give each request's steps: upload, admission, decode, the ModelInfer
 * call on the API (client) and on the server (from the handler's start, after the message was
 * received and decoded, to the answer's hand-off), session.run, the render and its encode.
 * Offsets are from the request's root span; the client's own send and full read of the answer
 * (fetch) frame them. Spans of two processes share the system clock (performance.timeOrigin),
 * to about a millisecond. With `--compare` another build's API and inference server run beside
 * this build's (each API calling its own build's server), requests alternating, and its
 * timeline is printed after this one's. `--pixel-threads` sets the APIs' pixel workers, `--render-bands`
 * this build's split of a lone render across idle workers (src/core/image/render-bands.ts), and
 * `--compare-bands M` runs this same build beside with renderBands M (1: never split); `--png-bands`
 * and `--compare-png-bands` do the same for the PNG encode in row bands (png-bands.ts). Each API's
 * process CPU per request is read from /proc around each request; `--load-clients N` then posts
 * with N clients at once, rounds alternating between the APIs, for the CPU per request under load.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { untilApiListening, untilInferenceServerReady } from './child-ready.js';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import onnxProto from 'onnx-proto';
import { FileKeyStore, ISNET_PROFILE } from '../src/core/index.js';
import { InferenceClient } from '../src/core/inference/inference-client.js';
import { prepareModelInput } from '../src/core/image/model-input.js';
import { probeImage } from '../src/core/image/pipeline.js';
import { GLIBC_MALLOC_TUNING } from '../src/runtime/allocator.js';
import { libuvPoolEnv } from '../src/runtime/libuv-pool.js';
import { V8_HEAP_FLAGS } from '../src/runtime/v8-heap.js';
import { startInferenceProcess } from '../test/helpers/inference-process.js';
import type { SpanRecord } from '../test/helpers/otel-spans.js';

const { values } = parseArgs({
  options: {
    image: { type: 'string' },
    runs: { type: 'string', default: '15' },
    warmup: { type: 'string', default: '5' },
    compare: { type: 'string' },
    json: { type: 'string' },
    // A file keeping the real mask between runs (made when missing): the model runs once.
    mask: { type: 'string' },
    // The APIs' pixel workers (BGCUT_PIXEL_THREADS) and this build's renderBands (BGCUT_RENDER_BANDS).
    'pixel-threads': { type: 'string' },
    'render-bands': { type: 'string' },
    // Also this same build with another renderBands (1: never split), requests alternating.
    'compare-bands': { type: 'string' },
    // This build's pngBands (BGCUT_PNG_BANDS), and this same build beside with another (1: whole).
    'png-bands': { type: 'string' },
    'compare-png-bands': { type: 'string' },
    // After the timeline: this many clients at once, `load-rounds` rounds of `load-requests` per API.
    'load-clients': { type: 'string', default: '0' },
    'load-rounds': { type: 'string', default: '3' },
    'load-requests': { type: 'string', default: '40' },
  },
});
if (!values.image) throw new Error('--image photo.jpg is required');
const runs = Number(values.runs);
const loadClients = Number(values['load-clients']);
const loadRounds = Number(values['load-rounds']);
const loadRequests = Number(values['load-requests']);
const warmup = Number(values.warmup);
const photo = await readFile(values.image);
const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-timeline-'));
const SPANS_HELPER = fileURLToPath(new URL('../test/helpers/otel-spans.js', import.meta.url));

/** The photo's mask by the real model, one call. */
async function realMask(): Promise<Uint8Array> {
  const server = await startInferenceProcess(['--threads', String(os.availableParallelism()), '--model', 'isnet-int8']);
  const client = new InferenceClient({ address: server.address, timeoutMs: 300_000, maxMessageBytes: 64 << 20, retryAfterSeconds: 1 });
  try {
    const limits = { maxInputPixels: 50_000_000 };
    const probe = await probeImage(photo, limits);
    const { input } = await prepareModelInput({ bytes: photo, probe, limits, profile: ISNET_PROFILE, decodeOnce: false });
    // A server with one --model serves it under the name isnet.
    const { mask } = await client.maskModel('isnet', ISNET_PROFILE)(input, AbortSignal.timeout(300_000));
    return new Uint8Array(mask.buffer, mask.byteOffset, mask.byteLength).slice();
  } finally {
    await client.close();
    await server.stop();
  }
}

/** ISNet's signature, answering `mask` whatever the input (an Identity of a constant). */
async function writeReplayModel(mask: Uint8Array): Promise<string> {
  const { onnx } = onnxProto;
  const { width, height } = ISNET_PROFILE;
  const tensor = (name: string, dims: number[]) => ({ name, type: { tensorType: { elemType: 2 /* UINT8 */, shape: { dim: dims.map((d) => ({ dimValue: d })) } } } });
  const bytes = onnx.ModelProto.encode({
    irVersion: 8,
    opsetImport: [{ version: 15 }],
    graph: {
      name: 'replay',
      initializer: [{ name: 'recorded', dataType: 2, dims: [1, 1, height, width], rawData: mask }],
      node: [{ opType: 'Identity', input: ['recorded'], output: ['mask'] }],
      input: [tensor('image', [1, height, width, 3])],
      output: [tensor('mask', [1, 1, height, width])],
    },
  }).finish();
  const file = path.join(dir, 'replay.onnx');
  await writeFile(file, bytes);
  return file;
}

/** A build's inference server serving the replay model as `isnet`, tracing into `spansFile`. */
async function startServer(modelFile: string, spansFile: string, build?: string): Promise<{ address: string; stop: () => Promise<void> }> {
  const args = ['--threads', String(os.availableParallelism()), '--model', `isnet=${modelFile}`];
  const env = { BGCUT_TEST_SPANS_FILE: spansFile, NODE_OPTIONS: `--import ${SPANS_HELPER}` };
  if (!build) return startInferenceProcess(args, env);
  const child = spawn(process.execPath, [path.resolve(build, 'src/inference-server/cli.js'), '--port', '0', ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const port = await untilInferenceServerReady(child, `${build}'s inference server`);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return { address: `127.0.0.1:${port}`, stop: () => (child.kill('SIGTERM'), exited) };
}

const keyStore = new FileKeyStore({ file: path.join(dir, 'keys.json') });
const { key } = await keyStore.createKey({ accountId: 'bench', plan: 'bench' });
await writeFile(path.join(dir, 'plans.json'), JSON.stringify({ plans: { bench: { requestsPerMinute: 1_000_000, maxConcurrent: 1000 } } }));

/** The Express example of a build, as npm start starts it (the launcher's settings), tracing into `spansFile`. */
async function startApi(inferenceAddress: string, spansFile: string, build?: string, env: Record<string, string> = {}): Promise<{ child: ChildProcess; url: string; stop: () => Promise<void> }> {
  const script = build ? path.resolve(build, 'examples/express-app.js') : fileURLToPath(new URL('../examples/express-app.js', import.meta.url));
  const port = 20000 + Math.floor(Math.random() * 20000);
  const child = spawn(process.execPath, [...V8_HEAP_FLAGS, '--import', SPANS_HELPER, script], {
    env: {
      ...process.env,
      ...GLIBC_MALLOC_TUNING,
      ...libuvPoolEnv(),
      PORT: String(port),
      BGCUT_KEYS_FILE: path.join(dir, 'keys.json'),
      BGCUT_PLANS_FILE: path.join(dir, 'plans.json'),
      BGCUT_INFERENCE_ADDRESS: inferenceAddress,
      BGCUT_MODEL_PROFILE: 'isnet',
      BGCUT_MODE_MODELS: 'off',
      BGCUT_TEST_SPANS_FILE: spansFile,
      ...(values['pixel-threads'] ? { BGCUT_PIXEL_THREADS: values['pixel-threads'] } : {}),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await untilApiListening(child);
  child.stdout!.resume();
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return { child, url: `http://127.0.0.1:${port}/v1/remove-bg`, stop: () => (child.kill('SIGTERM'), exited) };
}

/** One request: the client's send and the end of its read of the answer, in epoch ms. */
async function post(url: string): Promise<{ sent: number; firstByte: number; done: number; traceparent: string | null }> {
  const form = new FormData();
  form.append('file', new Blob([photo], { type: 'image/jpeg' }), 'photo.jpg');
  const now = () => performance.timeOrigin + performance.now();
  const sent = now();
  const response = await fetch(url, { method: 'POST', headers: { 'x-api-key': key }, body: form });
  const firstByte = now();
  await response.arrayBuffer();
  const done = now();
  if (response.status !== 200) throw new Error(`HTTP ${response.status}`);
  return { sent, firstByte, done, traceparent: response.headers.get('traceparent') };
}

/** The API's `bgcut_renders_total` (split in bands / one task) from its /metrics; zeros for a build without it. */
async function renders(url: string): Promise<{ bands: number; one: number; pngBands: number; pngWhole: number }> {
  const text = await (await fetch(new URL('/metrics', url))).text();
  const read = (name: string, split: string) => Number(new RegExp(`^${name}\\{split="${split}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
  return { bands: read('bgcut_renders_total', 'bands'), one: read('bgcut_renders_total', 'one'), pngBands: read('bgcut_png_encodes_total', 'bands'), pngWhole: read('bgcut_png_encodes_total', 'whole') };
}

/** A process's user + system CPU so far, in ms (/proc/PID/stat, clock ticks of 10 ms). */
function processCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
}
const CLOCK_TICKS = 100;

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s.length % 2 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const r1 = (x: number) => Math.round(x * 10) / 10;

type Timeline = Record<string, { start: number[]; end: number[] }>;

/** Each measured request's steps, as offsets from the client's send. */
function timelines(spans: SpanRecord[], requests: { sent: number; firstByte: number; done: number }[]): Timeline {
  const byTrace = new Map<string, SpanRecord[]>();
  for (const span of spans) (byTrace.get(span.traceId) ?? byTrace.set(span.traceId, []).get(span.traceId)!).push(span);
  const roots = spans.filter((s) => s.name === 'bgcut remove-bg').sort((a, b) => a.startMs - b.startMs);
  const out: Timeline = {};
  const add = (name: string, start: number, end: number) => {
    const row = (out[name] ??= { start: [], end: [] });
    row.start.push(start);
    row.end.push(end);
  };
  // The measured requests are the last `requests.length` roots, in order.
  const measured = roots.slice(roots.length - requests.length);
  measured.forEach((root, i) => {
    const request = requests[i]!;
    const t0 = request.sent;
    add('client: whole request (fetch)', 0, request.done - t0);
    add('client: response headers arrive', 0, request.firstByte - t0);
    const seen = new Map<string, number>();
    for (const span of (byTrace.get(root.traceId) ?? []).sort((a, b) => a.startMs - b.startMs)) {
      const side = span.pid === root.pid ? 'api' : 'server';
      const n = (seen.get(`${side}:${span.name}`) ?? 0) + 1;
      seen.set(`${side}:${span.name}`, n);
      add(`${side}: ${span.name}${n > 1 ? ` #${n}` : ''}`, span.startMs - t0, span.startMs + span.durationMs - t0);
    }
  });
  return out;
}

function print(label: string, timeline: Timeline): Record<string, { startMs: number; endMs: number; ms: number }> {
  const rows = Object.entries(timeline)
    .map(([name, { start, end }]) => ({ name, startMs: r1(median(start)), endMs: r1(median(end)), ms: r1(median(end.map((e, i) => e - start[i]!))) }))
    .sort((a, b) => a.startMs - b.startMs || a.endMs - b.endMs);
  console.log(`\n${label}: one request at a time, medians of ${runs} (ms from the client's send)`);
  console.log('| step | starts | ends | takes |\n|---|---|---|---|');
  for (const row of rows) console.log(`| ${row.name} | ${row.startMs} | ${row.endMs} | ${row.ms} |`);
  return Object.fromEntries(rows.map(({ name, ...rest }) => [name, rest]));
}

const mask = values.mask && existsSync(values.mask) ? new Uint8Array(await readFile(values.mask)) : await realMask();
if (values.mask && !existsSync(values.mask)) await writeFile(values.mask, mask);
if (mask.length !== ISNET_PROFILE.width * ISNET_PROFILE.height) throw new Error(`the mask has ${mask.length} bytes`);
const model = await writeReplayModel(mask);
const bandsEnv = (n: string | undefined): Record<string, string> => (n ? { BGCUT_RENDER_BANDS: n } : {});
const pngBandsEnv = (n: string | undefined): Record<string, string> => (n ? { BGCUT_PNG_BANDS: n } : {});
const apis = [
  {
    label: `this build${values['render-bands'] ? `, renderBands ${values['render-bands']}` : ''}${values['png-bands'] ? `, pngBands ${values['png-bands']}` : ''}`,
    spans: path.join(dir, 'api-spans.jsonl'),
    build: undefined as string | undefined,
    env: { ...bandsEnv(values['render-bands']), ...pngBandsEnv(values['png-bands']) },
  },
];
if (values.compare) apis.push({ label: values.compare, spans: path.join(dir, 'compared-spans.jsonl'), build: values.compare, env: {} });
if (values['compare-bands']) apis.push({ label: `this build, renderBands ${values['compare-bands']}`, spans: path.join(dir, 'compared-bands-spans.jsonl'), build: undefined, env: bandsEnv(values['compare-bands']) });
if (values['compare-png-bands']) {
  const env = { ...bandsEnv(values['render-bands']), ...pngBandsEnv(values['compare-png-bands']) };
  apis.push({ label: `this build, pngBands ${values['compare-png-bands']}`, spans: path.join(dir, 'compared-png-bands-spans.jsonl'), build: undefined, env });
}
// Each build's API calls its own build's inference server (both sides of the gRPC call change).
const serverSpans = path.join(dir, 'server-spans.jsonl');
const servers = await Promise.all(apis.map((a) => startServer(model, serverSpans, a.build)));
const started = await Promise.all(apis.map((a, k) => startApi(servers[k]!.address, a.spans, a.build, a.env)));
try {
  for (let i = 0; i < warmup; i++) for (const api of started) await post(api.url);
  const requests = started.map(() => [] as Awaited<ReturnType<typeof post>>[]);
  const cpuPerRequest = started.map(() => [] as number[]);
  for (let i = 0; i < runs; i++) {
    for (const [k, api] of started.entries()) {
      const before = processCpuMs(api.child.pid!);
      requests[k]!.push(await post(api.url));
      cpuPerRequest[k]!.push(processCpuMs(api.child.pid!) - before);
    }
  }
  // The exporters append as spans end; the last response's spans are written before its end.
  await new Promise((resolve) => setTimeout(resolve, 500));
  const server = (await readFile(serverSpans, 'utf8')).trim().split('\n').map((line) => JSON.parse(line) as SpanRecord);
  const report: Record<string, unknown> = { image: values.image, runs, loadavg: os.loadavg().map(r1) };
  for (const [k, api] of apis.entries()) {
    const own = (await readFile(api.spans, 'utf8')).trim().split('\n').map((line) => JSON.parse(line) as SpanRecord);
    report[api.label] = print(api.label, timelines([...own, ...server], requests[k]!));
  }
  const e2e = requests.map((rs) => median(rs.map((r) => r.done - r.sent)));
  // CPU is read in clock ticks (10 ms): the mean over the runs, not a median of ticks.
  const cpu = cpuPerRequest.map((xs) => xs.reduce((a, b) => a + b, 0) / xs.length);
  console.log(`\none at a time, ${runs} each: end to end (median), API process CPU per request (mean)`);
  for (const [k, api] of apis.entries()) {
    const ratio = k === 0 ? '' : `, ratio to ${apis[0]!.label}'s ${Math.round((e2e[0]! / e2e[k]!) * 1000) / 1000}`;
    console.log(`- ${api.label}: ${r1(e2e[k]!)} ms, CPU ${r1(cpu[k]!)} ms${ratio}`);
  }
  const timelineRenders = await Promise.all(started.map((api) => renders(api.url)));
  for (const [k, api] of apis.entries()) console.log(`- ${api.label}: renders split in bands ${timelineRenders[k]!.bands} of ${timelineRenders[k]!.bands + timelineRenders[k]!.one}, PNGs encoded in bands ${timelineRenders[k]!.pngBands} of ${timelineRenders[k]!.pngBands + timelineRenders[k]!.pngWhole} (warm-up included)`);
  report.endToEndMs = Object.fromEntries(apis.map((a, k) => [a.label, r1(e2e[k]!)]));
  report.cpuPerRequestMs = Object.fromEntries(apis.map((a, k) => [a.label, r1(cpu[k]!)]));
  if (loadClients > 0) {
    // Under load: `loadClients` clients at once, rounds alternating between the APIs; each API's
    // whole-process CPU per request over its round (/proc), medians of the rounds.
    const perRound = apis.map(() => [] as number[]);
    const wall = apis.map(() => [] as number[]);
    const rendersBefore = await Promise.all(started.map((api) => renders(api.url)));
    for (let round = 0; round < loadRounds; round++) {
      for (const [k, api] of started.entries()) {
        const before = processCpuMs(api.child.pid!);
        const t0 = performance.now();
        let next = 0;
        await Promise.all(Array.from({ length: loadClients }, async () => {
          while (next < loadRequests) {
            next++;
            await post(api.url);
          }
        }));
        wall[k]!.push((performance.now() - t0) / loadRequests);
        perRound[k]!.push((processCpuMs(api.child.pid!) - before) / loadRequests);
      }
    }
    console.log(`\n${loadClients} clients at once, ${loadRounds} rounds of ${loadRequests} requests per API, alternating: API process CPU per request (median of rounds), wall per request`);
    const rendersAfter = await Promise.all(started.map((api) => renders(api.url)));
    for (const [k, api] of apis.entries()) {
      const split = rendersAfter[k]!.bands - rendersBefore[k]!.bands;
      const one = rendersAfter[k]!.one - rendersBefore[k]!.one;
      const pngBands = rendersAfter[k]!.pngBands - rendersBefore[k]!.pngBands;
      const pngWhole = rendersAfter[k]!.pngWhole - rendersBefore[k]!.pngWhole;
      console.log(`- ${api.label}: CPU ${r1(median(perRound[k]!))} ms (rounds ${perRound[k]!.map(r1).join(', ')}), wall ${r1(median(wall[k]!))} ms; renders split ${split} of ${split + one}, PNGs in bands ${pngBands} of ${pngBands + pngWhole}`);
    }
    report.underLoad = Object.fromEntries(apis.map((a, k) => [a.label, { cpuPerRequestMs: perRound[k]!.map(r1), wallPerRequestMs: wall[k]!.map(r1) }]));
  }
  console.log(`(load average ${os.loadavg().map(r1).join(' ')})`);
  if (values.json) await writeFile(values.json, `${JSON.stringify(report, null, 2)}\n`);
} finally {
  await Promise.all(started.map((api) => api.stop()));
  await Promise.all(servers.map((server) => server.stop()));
}
