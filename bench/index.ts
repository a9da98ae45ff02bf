/**
 * npm run bench [-- --image photo.jpg] [--large photo-24mp.jpg] [--runs 5] [--warmup 10] [--soak 500] [--json out.json]
 *                 [--only latency,large,floor,concurrency,memory,scale,soak,balancing,modes,sizes,host] [--host-requests 2] [--host-attribution DIR] [--host-perf DIR] [--host-loads 24mp,1mp] [--model isnet | isnet-int8 | isnet-fp32 | isnet-fp16]
 *                 [--compare other-build/dist] [--api-runtime launcher|plain] [--compare-runtime launcher|plain] [--cpu-prof dir] [--memory-passes 2] [--memory-image 12mp.jpg] [--memory-variants npm-start] [--concurrency-levels 1,2,4,8,16] [--qualities fast,balanced] [--sizes 512,1024]
 *                 [--only int8 [--models isnet,isnet-int8,isnet-fp32]] [--only modes,imgly --model default [--imgly-dir DIR]]
 *                 [--only png-settings --image a.jpg,b.jpg [--large c.jpg]]
 *
 * Medians over at least 5 runs, measured side by side in one run so that every figure sees the
 * same machine load (docs/benchmarks.md describes every section and its figures):
 * - latency: a ~1 MP photo, time per stage, end-to-end over HTTP and raw session.run of the same
 *   model as the server runs it (a worker thread of the server's SessionPool, same options and
 *   threads; runs alternate); ratio end-to-end / raw;
 * - large: the same for a 24 MP photo;
 * - floor: the API process's CPU per image against the least work of its libraries for the same
 *   photo and output, in this process (bench/floor.ts); `--compare` adds another build's API;
 * - concurrency: throughput and p50/p95/p99 at 1, 2, 4, 8 and 16 concurrent clients, against
 *   the single-stream rate of raw session.run;
 * - memory: peak RSS of a fresh API process under 16 concurrent 12 MP uploads, with glibc's
 *   default malloc, glibc tuned, glibc tuned with the V8 heap flag (what npm start sets) and jemalloc;
 * - scale: 1 and 2 API processes (examples/cluster, shared Redis limits) against one inference
 *   server, 8 clients;
 * - soak: RSS of the inference server after request 50 and after request N (default 500);
 * - balancing: p50/p99 over three inference servers, one slowed, for each balancing policy
 *   (bench/balancing.ts: a tiny model and a delay flag, so the servers do not fight for CPU).
 * - int8 (not in the default set): session.run of the prepared built-ins named by --models
 *   (default isnet, isnet-int8), each in a worker thread as the server runs it, alternating, on
 *   the same photo; ratio of each to the first (bench/model-speed.ts). Runs alone, no API.
 * - modes (asked by name only): end to end over HTTP for each `quality` (or those of
 *   `--qualities fast,balanced`) on the ~1 MP photo, the modes alternating request by request,
 *   medians, and each mode's ratio to `balanced`;
 * - imgly (asked by name only): end to end of @imgly/background-removal-node 1.4.5 (installed
 *   into a scratch folder, bench/imgly.ts) against bgcut's default request, alternating, medians;
 *   with `--model default` bgcut runs as npm start runs it.
 * - png-settings (asked by name only, runs alone): CPU and bytes of PNG encoders and settings on
 *   the cutouts of the photos of `--image` (comma-separated) and `--large` (bench/png-settings.ts);
 * - sizes (asked by name only): raw session.run at input sizes 320..1536 or `--sizes a,b` (a
 *   model that takes any size), with each one's ratio to 1024.
 * - host (asked by name only): the API process's event-loop delay and a cheap route's latency
 *   beside a control process, under 2 clients x 24 MP and 8 clients x 1 MP, per output
 *   (bench/host.ts); `--compare` runs another build's API alike, cell by cell.
 * The API (examples/express-app) and the inference server run as their own processes; the API as
 * `npm start` starts it (`--api-runtime launcher`, the default: glibc malloc tuned, the V8 heap
 * flag of src/runtime/v8-heap.ts and UV_THREADPOOL_SIZE of src/runtime/libuv-pool.ts) or as bare `node` (`plain`); `--compare-runtime` picks the
 * compared API's (default: the same), so `--compare dist --compare-runtime plain` measures those
 * settings side by side on one build. `--model`
 * picks the served model (`isnet`, the prepared 8-bit one, or `isnet-fp16`, ISNet as shipped with
 * FP32 tensors); the raw baseline runs the same file. Each latency section also reports the API
 * process's CPU time per image (from /proc, the inference server excluded: the mean over the
 * runs, since /proc counts in 10 ms ticks) and the tensor bytes each ModelInfer call sends and
 * receives. Latency sections first send `--warmup` requests (default 10) that are not measured:
 * a serving API has answered many, and its JIT-compiled pixel loops are what it runs (the first
 * few requests of a fresh process run them interpreted, 2-3x slower). `--cpu-prof DIR` profiles
 * the API and prints a text flame graph (bench/cpu-profile-summary.ts) at the end.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { untilApiListening } from './child-ready.js';
import { mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import sharp from 'sharp';
import { connectRedis, FileKeyStore, ISNET_FP32_PROFILE, ISNET_PROFILE, RedisKeyStore } from '../src/core/index.js';
import { InferenceClient } from '../src/core/inference/inference-client.js';
import { inputShape, maskShape } from '../src/core/image/profile.js';
import { QUALITIES } from '../src/core/image/multi-pass.js';
import { imageToTensor, maskToGrey, upscaleMask } from '../src/core/image/tensor.js';
import { clearTransparent } from '../src/core/image/output.js';
import { measurePngSettings, pngEncoders, printPngSettings, type PngSettingsRow } from './png-settings.js';
import { FLOOR_VARIANTS, measureFloor, OPTION_COSTS, optionHints } from './floor.js';
import { printSummary, summarize } from './cpu-profile-summary.js';
import { resolveModelFile } from '../src/inference-server/model-source.js';
import { SessionPool } from '../src/inference-server/session-pool.js';
import { findJemalloc, GLIBC_MALLOC_TUNING } from '../src/runtime/allocator.js';
import { V8_HEAP_FLAGS } from '../src/runtime/v8-heap.js';
import { libuvPoolEnv } from '../src/runtime/libuv-pool.js';
import { launcherSettingsOf, OWN_LAUNCHER, type LauncherSettings } from './launcher-settings.js';
import { startInferenceProcess, type InferenceProcess } from '../test/helpers/inference-process.js';
import { startRedis } from '../test/helpers/redis-server.js';
import { objectOnTexture } from '../test/helpers/synthetic-image.js';
import { balancingBench, printBalancingTable } from './balancing.js';
import { compareModelSpeed, printModelSpeed } from './model-speed.js';
import { defaultImglyDir, ensureImgly, IMGLY_VERSION, startImgly } from './imgly.js';
import { hostBench } from './host.js';

const { values } = parseArgs({
  options: {
    image: { type: 'string' },
    large: { type: 'string' },
    runs: { type: 'string', default: '5' },
    soak: { type: 'string', default: '500' },
    json: { type: 'string' },
    only: { type: 'string', default: 'latency,large,concurrency,memory,soak,balancing' },
    model: { type: 'string', default: 'isnet' },
    warmup: { type: 'string', default: '10' },
    'cpu-prof': { type: 'string' },
    compare: { type: 'string' },
    'api-runtime': { type: 'string', default: 'launcher' },
    'compare-runtime': { type: 'string' },
    'memory-passes': { type: 'string', default: '2' },
    'memory-image': { type: 'string' },
    'concurrency-levels': { type: 'string', default: '1,2,4,8,16' },
    'memory-variants': { type: 'string' },
    models: { type: 'string', default: 'isnet,isnet-int8' },
    qualities: { type: 'string' },
    sizes: { type: 'string' },
    'imgly-dir': { type: 'string' },
    'host-requests': { type: 'string', default: '2' },
    'host-attribution': { type: 'string' },
    'host-perf': { type: 'string' },
    'host-loads': { type: 'string' },
    // floor: which images (the photo of --image, the 24 MP one), e.g. `photo` for a quick run.
    'floor-images': { type: 'string', default: 'photo,large' },
  },
});
const warmup = Number(values.warmup);
if (!Number.isInteger(warmup) || warmup < 1) throw new Error('--warmup must be at least 1');
const runs = Number(values.runs);
if (!Number.isInteger(runs) || runs < 5) throw new Error('--runs must be at least 5');
const sections = new Set(values.only!.split(','));
const known = ['latency', 'large', 'floor', 'concurrency', 'memory', 'scale', 'soak', 'balancing', 'modes', 'sizes', 'int8', 'host', 'png-settings', 'imgly'];
for (const s of sections) if (!known.includes(s)) throw new Error(`--only: unknown section ${s} (sections: ${known.join(', ')})`);
const threads = os.availableParallelism();
// The prepared built-ins (8-bit pixels in, 8-bit mask out) share a profile; isnet-fp16 is ISNet as shipped.
// `default`: the inference server as npm start runs it (no --model: isnet and isnet-int8, the API's
// mode table picks per pass); its raw baseline is isnet-int8, what balanced runs.
const byTable = values.model === 'default';
const preparedModel = ['isnet', 'isnet-int8', 'isnet-fp32', 'default'].includes(values.model!);
if (!preparedModel && values.model !== 'isnet-fp16') throw new Error('--model must be default, isnet, isnet-int8, isnet-fp32 or isnet-fp16');
const rawModel = byTable ? 'isnet-int8' : values.model!;
const profile = preparedModel ? ISNET_PROFILE : ISNET_FP32_PROFILE;
if (sections.has('int8')) {
  // Model against model, session.run alone: no API nor inference server started.
  if (sections.size > 1) throw new Error('--only int8 runs alone');
  const photo = values.image ? await readFile(values.image) : (await objectOnTexture(1224, 816)).bytes;
  const speed = await compareModelSpeed(photo, values.models!.split(','), runs);
  printModelSpeed(speed);
  if (values.json) await writeFile(values.json, `${JSON.stringify({ machine: `${os.cpus()[0]?.model ?? 'cpu'} x${os.cpus().length}`, int8: speed }, null, 2)}\n`);
  process.exit(0);
}
const CLOCK_TICKS_PER_S = 100;
/** User + system CPU time of a process so far, in ms, from /proc (Linux reports it in 1/100 s). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_S;
}

/** The same for a process's main thread alone (its task id is the process id): what runs on the host's event loop. */
function mainThreadCpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_S;
}

const median = (xs: number[]) => percentile(xs, 50);
function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const rank = (p / 100) * (s.length - 1);
  const lo = Math.floor(rank);
  return s[lo]! + (s[Math.min(s.length - 1, lo + 1)]! - s[lo]!) * (rank - lo);
}
const round = (x: number) => Math.round(x * 10) / 10;
/** Resident set size (or its peak, VmHWM) of a process, in MB, from /proc. */
function rssMb(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)![1]) / 1024;
}

const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-bench-'));
const keyStore = new FileKeyStore({ file: path.join(dir, 'keys.json') });
const { key } = await keyStore.createKey({ accountId: 'bench', plan: 'bench' });
await writeFile(path.join(dir, 'plans.json'), JSON.stringify({ plans: { bench: { requestsPerMinute: 1_000_000, maxConcurrent: 1000 } } }));

/** The Express example as its own process, on a free port. */
async function startApi(
  inferenceAddress: string,
  extraEnv: Record<string, string> = {},
  nodeArgs: string[] = [],
  /** Another build's dist/ folder (--compare), else this one. */
  build?: string,
): Promise<{ child: ChildProcess; url: string; stop: () => Promise<void> }> {
  const script = build ? path.resolve(build, 'examples/express-app.js') : fileURLToPath(new URL('../examples/express-app.js', import.meta.url));
  const port = 20000 + Math.floor(Math.random() * 20000);
  const child = spawn(process.execPath, [...nodeArgs, script], {
    env: {
      ...process.env,
      PORT: String(port),
      BGCUT_KEYS_FILE: path.join(dir, 'keys.json'),
      BGCUT_PLANS_FILE: path.join(dir, 'plans.json'),
      BGCUT_INFERENCE_ADDRESS: inferenceAddress,
      BGCUT_MODEL_PROFILE: preparedModel ? 'isnet' : 'isnet-fp32',
      // A shared machine can slow the model past the default 30 s deadline.
      BGCUT_INFERENCE_TIMEOUT_MS: '120000',
      // --model X: the server serves X alone, under the name `isnet` (its CLI names a single
      // built-in so), so the mode table's `isnet-int8` is rightly "not served" there: every pass
      // runs X anyway. The table is turned off rather than checked and warned about.
      ...(byTable ? {} : { BGCUT_MODE_MODELS: 'off' }),
      ...extraEnv,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await untilApiListening(child);
  child.stdout!.resume();
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    child,
    url: `http://127.0.0.1:${port}/v1/remove-bg`,
    stop: () => {
      child.kill('SIGTERM');
      return exited;
    },
  };
}

async function post(url: string, image: Buffer, query = '', part?: { name: string; data: Buffer }): Promise<{ ms: number; status: number; stages: Record<string, number> }> {
  if (query) url = `${url}?${query}`;
  const form = new FormData();
  form.append('file', new Blob([image], { type: 'image/jpeg' }), 'photo.jpg');
  if (part) form.append(part.name, new Blob([part.data]), `${part.name}.img`);
  const started = performance.now();
  let response: Response;
  try {
    response = await fetch(url, { method: 'POST', headers: { 'x-api-key': key }, body: form });
  } catch (error) {
    // The raw session.run between two posts blocks this process's event loop for seconds; on a
    // busy machine that outlasts the API's keep-alive timeout, the idle socket is closed under
    // the fetch, and the write fails before the request reached the API: send it again.
    const code = (error as { cause?: { code?: string } }).cause?.code;
    if (code !== 'EPIPE' && code !== 'ECONNRESET' && code !== 'UND_ERR_SOCKET') throw error;
    response = await fetch(url, { method: 'POST', headers: { 'x-api-key': key }, body: form });
  }
  await response.arrayBuffer();
  const ms = performance.now() - started;
  const stages = Object.fromEntries(
    (response.headers.get('server-timing') ?? '')
      .split(',')
      .filter(Boolean)
      .map((part) => {
        const [name, dur] = part.trim().split(';dur=');
        return [name!, Number(dur)];
      }),
  );
  return { ms, status: response.status, stages };
}

const inference: InferenceProcess = await startInferenceProcess(['--threads', String(threads), '--queue', '32', ...(byTable ? [] : ['--model', values.model!])]);
if (sections.has('png-settings')) {
  // Encoders against each other on the cutouts of real photos (the model's real masks): no API.
  if (sections.size > 1) throw new Error('--only png-settings runs alone');
  const files = [...(values.image ?? '').split(',').filter(Boolean), ...(values.large ? [values.large] : [])];
  if (files.length === 0) throw new Error('--only png-settings needs --image a.jpg[,b.jpg] (and optionally --large)');
  const client = new InferenceClient({ address: inference.address, timeoutMs: 120_000, maxMessageBytes: 64 << 20, retryAfterSeconds: 1 });
  const encoders = await pngEncoders();
  const rows: PngSettingsRow[] = [];
  console.log(`\npng-settings: PNG encoders on bgcut's cutouts (RGBA, transparent colour cleared; foreground colour estimation left out), CPU medians of ${runs} runs`);
  for (const file of files) {
    const { data: rgb, info } = await sharp(await readFile(file)).autoOrient().removeAlpha().raw().toBuffer({ resolveWithObject: true });
    const small = await sharp(rgb, { raw: { width: info.width, height: info.height, channels: 3 } }).resize(profile.width, profile.height, { fit: 'fill' }).raw().toBuffer();
    const { mask } = await client.maskModel(values.model!, profile)(imageToTensor(small, profile), new AbortController().signal);
    const alpha = upscaleMask(maskToGrey(mask, profile.minMaxNormalize), profile.width, profile.height, info.width, info.height);
    const colour = clearTransparent(rgb, alpha);
    const rgba = await sharp(colour, { raw: { width: info.width, height: info.height, channels: 3 } }).joinChannel(alpha, { raw: { width: info.width, height: info.height, channels: 1 } }).raw().toBuffer();
    const name = `${path.basename(file)} ${info.width}x${info.height}`;
    const measured = await measurePngSettings({ name, rgba, width: info.width, height: info.height }, encoders, runs);
    printPngSettings(measured);
    rows.push(...measured);
  }
  client.close();
  await inference.stop();
  if (values.json) await writeFile(values.json, `${JSON.stringify({ machine: `${os.cpus()[0]?.model ?? 'cpu'} x${os.cpus().length}`, pngSettings: rows }, null, 2)}\n`);
  process.exit(0);
}
// --cpu-prof DIR: the API runs under V8's sampling profiler (slower: for where the time goes,
// not for the figures); its profile is summarised at the end and written to DIR.
/**
 * How the bench starts an API process: `launcher`, as `npm start` (bgcut-launch) starts it, with
 * the glibc malloc tuning and the V8 heap flags; `plain`, bare `node`.
 */
const apiRuntime = (name: string | undefined, launcher: LauncherSettings = OWN_LAUNCHER): { env: Record<string, string>; nodeArgs: string[] } => {
  if (name === 'plain') return { env: {}, nodeArgs: [] };
  if (name === 'launcher') return { env: { ...launcher.malloc, ...launcher.libuv }, nodeArgs: [...launcher.v8Flags] };
  throw new Error(`--api-runtime/--compare-runtime must be launcher or plain, not ${name}`);
};
/**
 * `--compare DIR` starts that build as *its own* `npm start` would: its malloc tuning, libuv pool
 * and V8 flags, read from its dist (a build whose launcher sets other variables than this one's
 * would otherwise run under this build's, and a change to them would not show side by side).
 */
const comparedLauncher: LauncherSettings = values.compare ? await launcherSettingsOf(values.compare) : OWN_LAUNCHER;
const mainRuntime = apiRuntime(values['api-runtime']);
const api = await startApi(inference.address, mainRuntime.env, [...mainRuntime.nodeArgs, ...(values['cpu-prof'] ? ['--cpu-prof', '--cpu-prof-dir', values['cpu-prof']] : [])]);
// The raw baseline runs the model as the inference server does: in a worker thread of its own,
// through the same SessionPool, with the same session options and threads; `raw` is the time of
// session.run alone, measured in the worker, as the server's `inference` stage is.
const rawPool = new SessionPool({ modelFile: await resolveModelFile(rawModel), providers: ['cpu'], workers: 1, intraOpThreads: threads, maxQueue: 1 });
await rawPool.start();
async function rawRun(image: Buffer, size = { width: profile.width, height: profile.height }): Promise<() => Promise<number>> {
  const sized = { ...profile, ...size };
  const rgb = await sharp(image).autoOrient().removeAlpha().resize(sized.width, sized.height, { fit: 'fill' }).raw().toBuffer();
  const tensor = imageToTensor(rgb, sized);
  const datatype = tensor instanceof Float32Array ? 'FP32' : 'UINT8';
  return async () => {
    // The buffer is transferred to the worker: a fresh copy each run (not timed).
    const data = tensor.buffer.slice(tensor.byteOffset, tensor.byteOffset + tensor.byteLength) as ArrayBuffer;
    const { runMs } = await rawPool.run([{ name: profile.inputName, datatype, shape: inputShape(sized), data }], [profile.outputName]);
    return runMs;
  };
}

const report: Record<string, unknown> = { machine: `${os.cpus()[0]?.model ?? 'cpu'} x${os.cpus().length}`, threads, runs, model: values.model };
// The tensor payload of one ModelInfer call, from the served model's metadata (protobuf framing adds a few dozen bytes).
{
  const client = new InferenceClient({ address: inference.address, timeoutMs: 10_000, maxMessageBytes: 64 << 20, retryAfterSeconds: 1 });
  const meta = await client.metadata('isnet', 10_000);
  client.close();
  // A free (-1) dimension takes the profile's (one image, at balanced's size).
  const bytesOf = (t: { datatype: string; shape: number[] }, asSent: number[]) =>
    t.shape.reduce((a, d, i) => a * (Number(d) > 0 ? Number(d) : asSent[i]!), 1) * ({ UINT8: 1, UINT16: 2, FP16: 2, FP32: 4 } as Record<string, number>)[t.datatype]!;
  const input = meta.inputs.find((t) => t.name === profile.inputName)!;
  const output = meta.outputs.find((t) => t.name === profile.outputName)!;
  const sent = bytesOf(input, inputShape(profile));
  const received = bytesOf(output, maskShape(profile));
  report.bytesPerCall = { sent, received };
  console.log(`ModelInfer tensor bytes per call (${values.model}, balanced): sent ${sent}, received ${received}`);
}
let rawMedian = NaN;
/** Processes a section started, stopped at the end even when the section failed. */
const alsoStop: (() => Promise<void>)[] = [];

/** End-to-end against raw, alternating, with per-stage medians. */
async function latency(label: string, image: Buffer) {
  const meta = await sharp(image).metadata();
  const raw = await rawRun(image);
  for (let i = 0; i < warmup; i++) await post(api.url, image);
  await raw();
  const e2e: number[] = [];
  const rawMs: number[] = [];
  let apiCpu = 0;
  let mainCpu = 0;
  // --compare DIR: the same requests, alternating, to an API of another build, for its main thread's CPU beside this one's.
  const comparedRuntime = apiRuntime(values['compare-runtime'] ?? values['api-runtime'], comparedLauncher);
  const compared = values.compare ? await startApi(inference.address, comparedRuntime.env, comparedRuntime.nodeArgs, values.compare) : undefined;
  if (compared) alsoStop.push(compared.stop);
  if (compared) for (let i = 0; i < warmup; i++) await post(compared.url, image);
  let comparedMainCpu = 0;
  const comparedE2e: number[] = [];
  const stages: Record<string, number[]> = {};
  for (let i = 0; i < runs; i++) {
    const cpuBefore = cpuMs(api.child.pid!);
    const mainBefore = mainThreadCpuMs(api.child.pid!);
    const result = await post(api.url, image);
    apiCpu += cpuMs(api.child.pid!) - cpuBefore;
    mainCpu += mainThreadCpuMs(api.child.pid!) - mainBefore;
    if (compared) {
      const before = mainThreadCpuMs(compared.child.pid!);
      const other = await post(compared.url, image);
      if (other.status !== 200) throw new Error('compared build: HTTP error');
      comparedMainCpu += mainThreadCpuMs(compared.child.pid!) - before;
      comparedE2e.push(other.ms);
    }
    if (result.status !== 200) throw new Error(`HTTP ${result.status}`);
    e2e.push(result.ms);
    for (const [stage, ms] of Object.entries(result.stages)) (stages[stage] ??= []).push(ms);
    (stages.modelInfer ??= []).push((result.stages.inference ?? 0) + (result.stages.transfer ?? 0));
    rawMs.push(await raw());
  }
  const section = {
    image: `${meta.width}x${meta.height} (${(((meta.width ?? 0) * (meta.height ?? 0)) / 1e6).toFixed(1)} MP, ${(image.length / 1e6).toFixed(1)} MB)`,
    endToEndMs: round(median(e2e)),
    rawSessionRunMs: round(median(rawMs)),
    stagesMs: Object.fromEntries(Object.entries(stages).map(([s, xs]) => [s, round(median(xs))])),
    ratioEndToEndOverRaw: Math.round((median(e2e) / median(rawMs)) * 1000) / 1000,
    // The API process's own CPU per image (decode, resize, compose, encode, gRPC), 10 ms resolution.
    apiCpuMsPerImage: round(apiCpu / runs),
    // Its main thread's share: what the host's event loop spent per image.
    apiMainThreadCpuMsPerImage: round(mainCpu / runs),
    ...(compared
      ? {
          comparedMainThreadCpuMsPerImage: round(comparedMainCpu / runs),
          // The other build's end to end, its requests alternating with this one's.
          comparedEndToEndMs: round(median(comparedE2e)),
          ratioEndToEndOverCompared: Math.round((median(e2e) / median(comparedE2e)) * 1000) / 1000,
        }
      : {}),
  };
  await compared?.stop();
  report[label] = section;
  console.log(`\n${label}: ${section.image}, medians of ${runs} runs after ${warmup} unmeasured`);
  console.log('| measure | ms |\n|---|---|');
  for (const [s, ms] of Object.entries(section.stagesMs)) console.log(`| stage ${s} | ${ms} |`);
  console.log(`| end-to-end HTTP | ${section.endToEndMs} |\n| raw session.run | ${section.rawSessionRunMs} |\n| **end-to-end / raw** | **${section.ratioEndToEndOverRaw}** |`);
  console.log(`| API process CPU per image (mean) | ${section.apiCpuMsPerImage} |`);
  console.log(`| API main thread CPU per image (mean) | ${section.apiMainThreadCpuMsPerImage} |`);
  if (compared) console.log(`| ${values.compare}: API main thread CPU per image (mean, alternating) | ${section.comparedMainThreadCpuMsPerImage} |`);
  if (compared) console.log(`| ${values.compare}: end-to-end HTTP (alternating) | ${section.comparedEndToEndMs} |\n| **end-to-end / ${values.compare}'s** | **${section.ratioEndToEndOverCompared}** |`);
  return median(rawMs);
}

try {
  const photo = values.image ? await readFile(values.image) : (await objectOnTexture(1224, 816)).bytes;
  const largeImage = async () =>
    values.large
      ? await readFile(values.large)
      : await sharp((await objectOnTexture(1500, 1000, 'raw')).rgb, { raw: { width: 1500, height: 1000, channels: 3 } })
          .resize(6000, 4000)
          .jpeg({ quality: 85 })
          .toBuffer();
  if (sections.has('latency')) rawMedian = await latency('latency_1mp', photo);
  if (sections.has('sizes')) {
    // Raw session.run at each input size (a model that takes any size), sizes alternating.
    const sizes = (values.sizes ?? '320,512,640,768,1024,1280,1536').split(',').map(Number);
    if (!sizes.includes(1024)) sizes.push(1024);
    const runners = await Promise.all(sizes.map((n) => rawRun(photo, { width: n, height: n })));
    for (const run of runners) await run();
    const times = sizes.map(() => [] as number[]);
    for (let i = 0; i < runs; i++) for (const [k, run] of runners.entries()) times[k]!.push(await run());
    const base = median(times[sizes.indexOf(1024)]!);
    report.sizes = Object.fromEntries(sizes.map((n, k) => [n, { sessionRunMs: round(median(times[k]!)), ratioTo1024: Math.round((median(times[k]!) / base) * 1000) / 1000 }]));
    console.log(`\nsizes: raw session.run per input size (${values.model}), medians of ${runs} runs, sizes alternating`);
    console.log('| size | ms | / 1024 |\n|---|---|---|');
    for (const [n, r] of Object.entries(report.sizes as Record<string, { sessionRunMs: number; ratioTo1024: number }>)) console.log(`| ${n} | ${r.sessionRunMs} | ${r.ratioTo1024} |`);
  }
  if (sections.has('modes')) {
    // With the mode table (--model default), `balanced` pinned to the float model too: what balanced ran before.
    const qualities: string[] = [...QUALITIES.filter((q) => (values.qualities ? values.qualities.split(',').includes(q) : true)), ...(byTable ? ['balanced&model=isnet'] : [])];
    for (let i = 0; i < warmup; i++) for (const q of qualities) await post(api.url, photo, `quality=${q}`);
    const times: Record<string, number[]> = {};
    for (let i = 0; i < runs; i++) {
      for (const q of qualities) {
        const result = await post(api.url, photo, `quality=${q}`);
        if (result.status !== 200) throw new Error(`HTTP ${result.status}`);
        (times[q] ??= []).push(result.ms);
      }
    }
    const section = Object.fromEntries(qualities.map((q) => [q, { endToEndMs: round(median(times[q]!)), ratioToBalanced: Math.round((median(times[q]!) / median(times.balanced!)) * 1000) / 1000 }]));
    report.modes_1mp = section;
    console.log(`\nmodes_1mp: end to end per quality, medians of ${runs} runs after ${warmup} unmeasured each, alternating`);
    console.log('| quality | ms | / balanced |\n|---|---|---|');
    for (const q of qualities) console.log(`| ${q} | ${section[q]!.endToEndMs} | ${section[q]!.ratioToBalanced} |`);
  }
  if (sections.has('imgly')) {
    // The in-process library against bgcut as npm start runs it (use --model default), same photo, alternating.
    const imglyDir = values['imgly-dir'] ?? defaultImglyDir();
    ensureImgly(imglyDir);
    const file = path.join(dir, 'imgly-photo');
    await writeFile(file, photo);
    const imgly = startImgly(imglyDir);
    try {
      await imgly.run(file); // loads its model
      for (let i = 0; i < warmup; i++) await post(api.url, photo);
      const times = { bgcut: [] as number[], imgly: [] as number[] };
      for (let i = 0; i < runs; i++) {
        const result = await post(api.url, photo);
        if (result.status !== 200) throw new Error(`HTTP ${result.status}`);
        times.bgcut.push(result.ms);
        times.imgly.push(await imgly.run(file));
      }
      const section = { bgcutMs: round(median(times.bgcut)), imglyMs: round(median(times.imgly)), imglyOverBgcut: Math.round((median(times.imgly) / median(times.bgcut)) * 100) / 100, runs: times };
      report.imgly = section;
      console.log(`\nimgly: end to end, @imgly/background-removal-node ${IMGLY_VERSION} (in process, PNG) against bgcut (${values.model}, balanced, PNG over HTTP), medians of ${runs} alternating runs`);
      console.log(`| bgcut ms | imgly ms | imgly / bgcut |\n|---|---|---|\n| ${section.bgcutMs} | ${section.imglyMs} | **${section.imglyOverBgcut}** |`);
    } finally {
      imgly.stop();
    }
  }
  if (sections.has('large')) {
    await latency('latency_24mp', await largeImage());
  }

  if (sections.has('host')) {
    const comparedRuntime = apiRuntime(values['compare-runtime'] ?? values['api-runtime'], comparedLauncher);
    report.host = await hostBench({
      startApi: (env, nodeArgs, build) => {
        const runtime = build ? comparedRuntime : mainRuntime;
        return startApi(inference.address, { ...runtime.env, ...env }, [...runtime.nodeArgs, ...nodeArgs], build);
      },
      key,
      photo,
      large: await largeImage(),
      compare: values.compare,
      requestsPerClient: Number(values['host-requests']),
      attribution: values['host-attribution'],
      perf: values['host-perf'],
      loads: values['host-loads']?.split(',') as ('24mp' | '1mp')[] | undefined,
    });
  }

  if (sections.has('floor')) {
    const floorImages = new Set(values['floor-images']!.split(','));
    const images: [string, Buffer][] = [];
    if (floorImages.has('photo')) images.push(['photo', photo]);
    if (floorImages.has('large')) images.push(['large', await largeImage()]);
    const client = new InferenceClient({ address: inference.address, timeoutMs: 120_000, maxMessageBytes: 64 << 20, retryAfterSeconds: 1 });
    const rows: Record<string, unknown>[] = [];
    // --compare DIR: the same requests, alternating, to an API started from another build
    // (e.g. main's dist/ kept in a temporary folder): before and after side by side in one run.
    const comparedRuntime = apiRuntime(values['compare-runtime'] ?? values['api-runtime'], comparedLauncher);
    const compared = values.compare ? await startApi(inference.address, comparedRuntime.env, comparedRuntime.nodeArgs, values.compare) : undefined;
    if (compared) alsoStop.push(compared.stop);
    /** Mean CPU ms per request of an API process over `runs` requests, after one unmeasured. */
    const apiCpuPerImage = async (target: { url: string; child: ChildProcess }, image: Buffer, query: string) => {
      await post(target.url, image, query);
      // Requests run one at a time, so the CPU between a request's start and end is its own;
      // one that failed (a 504 when a loaded machine slows the model past the deadline) is
      // left out and sent again.
      let total = 0;
      for (let ok = 0, failed = 0; ok < runs; ) {
        const before = cpuMs(target.child.pid!);
        const r = await post(target.url, image, query);
        if (r.status === 200) {
          total += cpuMs(target.child.pid!) - before;
          ok++;
        } else if (++failed > runs) throw new Error(`HTTP ${r.status}`);
      }
      return total / runs;
    };
    console.log(`\nfloor: API process CPU per image against the least work of its libraries (floor: medians of ${runs}, in this process; API: mean of ${runs} requests from /proc, after unmeasured ones)`);
    const compareHead = compared ? ` | ${values.compare} API CPU ms | its API / floor | its API / same-output floor` : '';
    console.log(
      `| image | output | API CPU ms | per MP | floor ms | API / floor | same-output floor ms | API / same-output floor${compareHead} | floor parts (ms) |\n|---|---|---|---|---|---|---|---|---|${compared ? '---|---|---|' : ''}`,
    );
    for (const [label, image] of images) {
      const meta = await sharp(image).metadata();
      const mp = ((meta.width ?? 0) * (meta.height ?? 0)) / 1e6;
      // The model's real answer for this photo, at the model's size.
      const rgb = await sharp(image).removeAlpha().resize(profile.width, profile.height, { fit: 'fill' }).raw().toBuffer();
      const { mask } = await client.maskModel('isnet', profile)(imageToTensor(rgb, profile), new AbortController().signal);
      const modelMask = maskToGrey(mask, profile.minMaxNormalize);
      for (let i = 0; i < warmup; i++) await post(api.url, image);
      if (compared) for (let i = 0; i < warmup; i++) await post(compared.url, image);
      for (const variant of FLOOR_VARIANTS) {
        const apiCpu = await apiCpuPerImage(api, image, variant.query);
        const compareCpu = compared ? await apiCpuPerImage(compared, image, variant.query) : undefined;
        const floor = await measureFloor(image, modelMask, profile, variant, runs);
        // The floor for the API's own output, made its way (bench/floor.ts); `channels=alpha`
        // has one floor.
        const sameOutputMs = floor.sameOutputMs ?? floor.ms;
        const row = {
          image: `${label} ${meta.width}x${meta.height} (${mp.toFixed(1)} MP)`,
          output: variant.name,
          apiCpuMs: round(apiCpu),
          apiCpuMsPerMp: round(apiCpu / mp),
          floorMs: round(floor.ms),
          ratio: Math.round((apiCpu / floor.ms) * 100) / 100,
          sameOutputFloorMs: round(sameOutputMs),
          sameOutputRatio: Math.round((apiCpu / sameOutputMs) * 100) / 100,
          floorParts: Object.fromEntries(Object.entries(floor.parts).map(([k, v]) => [k, round(v)])),
          floorInput: floor.inputWay,
          ...(compareCpu === undefined
            ? {}
            : {
                comparedApiCpuMs: round(compareCpu),
                comparedRatio: Math.round((compareCpu / floor.ms) * 100) / 100,
                comparedSameOutputRatio: Math.round((compareCpu / sameOutputMs) * 100) / 100,
              }),
        };
        rows.push(row);
        const parts = Object.entries(row.floorParts).map(([k, v]) => `${k} ${v}`).join(', ');
        const before = compareCpu === undefined ? '' : ` | ${row.comparedApiCpuMs} | ${row.comparedRatio} | ${row.comparedSameOutputRatio}`;
        console.log(
          `| ${row.image} | ${row.output} | ${row.apiCpuMs} | ${row.apiCpuMsPerMp} | ${row.floorMs} | **${row.ratio}** | ${row.sameOutputFloorMs} | **${row.sameOutputRatio}**${before} | ${parts} (${row.floorInput}) |`,
        );
      }
    }
    client.close();
    await compared?.stop();
    report.floor = rows;

    // What each output option costs the API, against plain PNG and the PNG floor of the same run.
    const optionRows: Record<string, unknown>[] = [];
    console.log(`\noption costs: API process CPU per image with each option alone (mean of ${runs} requests each, interleaved option by option; the floor is the PNG floor above)`);
    console.log('| image | option | API CPU ms | over plain PNG (ms) | API / PNG floor |\n|---|---|---|---|---|');
    for (const [label, image] of images) {
      const meta = await sharp(image, { limitInputPixels: false }).rotate().metadata();
      const upright = (meta.orientation ?? 1) >= 5 ? { width: meta.height!, height: meta.width! } : { width: meta.width!, height: meta.height! };
      const hints = await optionHints(upright.width, upright.height);
      const imageName = `${label} ${meta.width}x${meta.height}`;
      const pngFloor = rows.find((row) => row.output === 'png' && String(row.image).startsWith(imageName)) as { floorMs: number } | undefined;
      const totals = OPTION_COSTS.map(() => 0);
      const partOf = (option: (typeof OPTION_COSTS)[number]) => (option.part === 'hints' ? { name: 'hints', data: hints } : option.part === 'bg_image' ? { name: 'bg_image', data: image } : undefined);
      for (const option of OPTION_COSTS) await post(api.url, image, option.query, partOf(option));
      for (let round = 0; round < runs; round++) {
        for (const [i, option] of OPTION_COSTS.entries()) {
          for (let attempt = 0; ; attempt++) {
            const before = cpuMs(api.child.pid!);
            const r = await post(api.url, image, option.query, partOf(option));
            if (r.status === 200) {
              totals[i]! += cpuMs(api.child.pid!) - before;
              break;
            }
            if (attempt >= 2) throw new Error(`option ${option.name}: HTTP ${r.status}`);
          }
        }
      }
      const base = totals[0]! / runs;
      for (const [i, option] of OPTION_COSTS.entries()) {
        const cpu = totals[i]! / runs;
        const row = { image: imageName, option: option.name, apiCpuMs: round(cpu), overPngMs: round(cpu - base), overPngFloor: pngFloor ? Math.round((cpu / pngFloor.floorMs) * 100) / 100 : null };
        optionRows.push(row);
        console.log(`| ${row.image} | ${row.option} | ${row.apiCpuMs} | ${i === 0 ? '-' : (row.overPngMs >= 0 ? '+' : '') + row.overPngMs} | ${row.overPngFloor ?? '-'} |`);
      }
    }
    report.optionCosts = optionRows;
  }

  if (sections.has('concurrency')) {
    if (Number.isNaN(rawMedian)) {
      // One at a time: the single-stream rate.
      const run = await rawRun(photo);
      await run();
      const samples: number[] = [];
      for (let i = 0; i < runs; i++) samples.push(await run());
      rawMedian = median(samples);
    }
    const levels = [];
    // --concurrency-levels 8: only that level (the throughput ratio is taken at 8 clients).
    const clientLevels = values['concurrency-levels']!.split(',').map(Number);
    if (!clientLevels.includes(8)) clientLevels.push(8);
    for (const clients of clientLevels) {
      const perClient = Math.max(2, Math.ceil(8 / clients));
      const latencies: number[] = [];
      let errors = 0;
      const started = performance.now();
      await Promise.all(
        Array.from({ length: clients }, async () => {
          for (let i = 0; i < perClient; i++) {
            const r = await post(api.url, photo);
            if (r.status === 200) latencies.push(r.ms);
            else errors++;
          }
        }),
      );
      const seconds = (performance.now() - started) / 1000;
      levels.push({
        clients,
        requests: clients * perClient,
        errors,
        throughputPerS: Math.round((latencies.length / seconds) * 1000) / 1000,
        p50Ms: round(percentile(latencies, 50)),
        p95Ms: round(percentile(latencies, 95)),
        p99Ms: round(percentile(latencies, 99)),
      });
    }
    const rawRate = 1000 / rawMedian;
    const at8 = levels.find((l) => l.clients === 8)!.throughputPerS;
    report.concurrency = { levels, rawSingleStreamPerS: Math.round(rawRate * 1000) / 1000, ratioThroughputAt8OverRaw: Math.round((at8 / rawRate) * 1000) / 1000 };
    console.log(`\nconcurrency (1 MP photo; raw single-stream ${rawRate.toFixed(3)}/s)`);
    console.log('| clients | requests | errors | throughput /s | p50 ms | p95 ms | p99 ms |\n|---|---|---|---|---|---|---|');
    for (const l of levels) console.log(`| ${l.clients} | ${l.requests} | ${l.errors} | ${l.throughputPerS} | ${l.p50Ms} | ${l.p95Ms} | ${l.p99Ms} |`);
    console.log(`| **throughput at 8 / raw single-stream** | | | **${(at8 / rawRate).toFixed(3)}** | | | |`);
  }

  if (sections.has('memory')) {
    // --memory-image: a real ~12 MP photo (e.g. the 24 MP smoke photo resized into a temp folder).
    const big = values['memory-image']
      ? await readFile(values['memory-image'])
      : await sharp((await objectOnTexture(1060, 708, 'raw')).rgb, { raw: { width: 1060, height: 708, channels: 3 } })
          .resize(4240, 2832)
          .jpeg({ quality: 90 })
          .toBuffer();
    const bigMeta = await sharp(big).metadata();
    // The same burst on a fresh API process with glibc's default malloc, with glibc tuned (fewer
    // arenas, large blocks mapped and unmapped at once), with that and the V8 heap flag (what
    // `npm start`'s bgcut-launch sets by default) and with jemalloc preloaded (its
    // BGCUT_MALLOC=jemalloc, when the machine has the library), alternating.
    const jemalloc = findJemalloc();
    const variants: Record<string, { env: Record<string, string>; nodeArgs?: string[]; build?: string }> = {
      default: { env: {} },
      'glibc tuned': { env: { ...GLIBC_MALLOC_TUNING } },
      [`glibc tuned, ${V8_HEAP_FLAGS.join(' ')} (npm start)`]: apiRuntime('launcher'),
    };
    if (jemalloc) variants.jemalloc = { env: { LD_PRELOAD: jemalloc } };
    else console.log('memory: no jemalloc variant (libjemalloc.so.2 not found; apt-get install libjemalloc2)');
    // --memory-variants npm-start: only the API as npm start starts it (three fresh runs: --memory-passes 3).
    if (values['memory-variants'] === 'npm-start') for (const name of Object.keys(variants)) if (!name.endsWith('(npm start)')) delete variants[name];
    // --compare DIR: the same as npm start starts it, from that build, alternating with this one's.
    if (values.compare) variants[`${values.compare} (npm start)`] = { ...apiRuntime(values['compare-runtime'] ?? 'launcher', comparedLauncher), build: values.compare };
    const peaks: Record<string, number[]> = {};
    const idles: Record<string, number[]> = {};
    const cpus: Record<string, number[]> = {};
    // Wall time of the whole burst (the 16 answers): what the memory bounds cost in time.
    const walls: Record<string, number[]> = {};
    const statuses = new Set<number>();
    for (let pass = 0; pass < Number(values['memory-passes']); pass++) {
      for (const [name, { env, nodeArgs, build }] of Object.entries(variants)) {
        const fresh = await startApi(inference.address, env, nodeArgs, build);
        try {
          (idles[name] ??= []).push(rssMb(fresh.child.pid!, 'VmRSS'));
          const cpuBefore = cpuMs(fresh.child.pid!);
          const burstStarted = performance.now();
          const results = await Promise.all(Array.from({ length: 16 }, () => post(fresh.url, big)));
          (walls[name] ??= []).push((performance.now() - burstStarted) / 1000);
          (cpus[name] ??= []).push((cpuMs(fresh.child.pid!) - cpuBefore) / 16);
          for (const r of results) statuses.add(r.status);
          (peaks[name] ??= []).push(rssMb(fresh.child.pid!, 'VmHWM'));
        } finally {
          fresh.stop();
        }
      }
    }
    report.memory = {
      uploads: `16 concurrent ${bigMeta.width}x${bigMeta.height} JPEGs (${(big.length / 1e6).toFixed(1)} MB each${values['memory-image'] ? `, ${path.basename(values['memory-image'])}` : ', synthetic'})`,
      statuses: [...statuses],
      glibcTuning: GLIBC_MALLOC_TUNING,
      ...Object.fromEntries(Object.keys(variants).map((name) => [name, { idleRssMb: round(median(idles[name]!)), peakRssMb: round(median(peaks[name]!)), peaks: peaks[name]!.map(round), apiCpuMsPerImage: round(median(cpus[name]!)), burstWallS: round(median(walls[name]!)) }])),
    };
    console.log(`\nmemory: API process peak RSS under 16 concurrent ${bigMeta.width}x${bigMeta.height} uploads (statuses ${[...statuses].join(',')}), medians of ${values['memory-passes']} fresh processes each`);
    console.log('| malloc | idle MB | peak MB | API CPU ms per 12 MP image | burst wall s (16 answers) |\n|---|---|---|---|---|');
    for (const name of Object.keys(variants)) {
      console.log(`| ${name} | ${median(idles[name]!).toFixed(0)} | ${median(peaks[name]!).toFixed(0)} (${peaks[name]!.map((p) => p.toFixed(0)).join(', ')}) | ${median(cpus[name]!).toFixed(0)} | ${median(walls[name]!).toFixed(1)} (${walls[name]!.map((w) => w.toFixed(1)).join(', ')}) |`);
    }
  }

  if (sections.has('scale')) {
    // 1 and 2 API processes (examples/cluster: one port, Node's cluster module) sharing Redis
    // limits, against the one inference server, 8 clients; throughput, and the API tier's CPU
    // per image (every API process together, from /proc).
    const redis = await startRedis();
    const connection = connectRedis(redis.url);
    if (connection.status !== 'ready') await new Promise((resolve) => connection.once('ready', resolve));
    const { key: redisKey } = await new RedisKeyStore({ redis: connection }).createKey({ accountId: 'bench', plan: 'bench' });
    const rows = [];
    try {
      for (const processes of [1, 2]) {
        const port = 20000 + Math.floor(Math.random() * 20000);
        const child = spawn(process.execPath, [fileURLToPath(new URL('../examples/cluster.js', import.meta.url))], {
          env: {
            ...process.env,
            PORT: String(port),
            REDIS_URL: redis.url,
            BGCUT_API_PROCESSES: String(processes),
            BGCUT_PLANS_FILE: path.join(dir, 'plans.json'),
            BGCUT_INFERENCE_ADDRESS: inference.address,
            BGCUT_MODEL_PROFILE: values.model === 'isnet' ? 'isnet' : 'isnet-fp32',
            BGCUT_INFERENCE_TIMEOUT_MS: '120000',
          },
          stdio: ['ignore', 'pipe', 'inherit'],
        });
        const pids: number[] = [child.pid!];
        await new Promise<void>((resolve, reject) => {
          let out = '';
          child.stdout!.on('data', (chunk: Buffer) => {
            out += chunk.toString();
            for (const m of out.matchAll(/API process (\d+) listening/g)) if (!pids.includes(Number(m[1]))) pids.push(Number(m[1]));
            if (pids.length === processes + 1) resolve();
          });
          child.once('exit', (code) => reject(new Error(`cluster exited with ${code}`)));
        });
        child.stdout!.resume();
        const url = `http://127.0.0.1:${port}/v1/remove-bg`;
        const send = async () => {
          const form = new FormData();
          form.append('file', new Blob([photo], { type: 'image/jpeg' }), 'photo.jpg');
          const response = await fetch(url, { method: 'POST', headers: { 'x-api-key': redisKey }, body: form });
          await response.arrayBuffer();
          return response.status;
        };
        for (let i = 0; i < 2 * processes; i++) await send();
        const cpuBefore = pids.reduce((sum, pid) => sum + cpuMs(pid), 0);
        const clients = 8;
        const perClient = 2;
        let ok = 0;
        const started = performance.now();
        await Promise.all(Array.from({ length: clients }, async () => {
          for (let i = 0; i < perClient; i++) if ((await send()) === 200) ok++;
        }));
        const seconds = (performance.now() - started) / 1000;
        const cpu = pids.reduce((sum, pid) => sum + cpuMs(pid), 0) - cpuBefore;
        rows.push({ processes, requests: clients * perClient, ok, throughputPerS: Math.round((ok / seconds) * 1000) / 1000, apiCpuMsPerImage: round(cpu / Math.max(1, ok)) });
        child.kill('SIGTERM');
        await new Promise((resolve) => child.once('exit', resolve));
      }
    } finally {
      connection.disconnect();
      await redis.stop();
    }
    report.scale = rows;
    console.log('\nscale: API processes (one port, shared Redis limits) against one inference server, 8 clients, 1 MP photo');
    console.log('| API processes | requests | 200 | throughput /s | API tier CPU ms per image |\n|---|---|---|---|---|');
    for (const r of rows) console.log(`| ${r.processes} | ${r.requests} | ${r.ok} | ${r.throughputPerS} | ${r.apiCpuMsPerImage} |`);
  }

  if (sections.has('soak')) {
    const total = Number(values.soak);
    const client = new InferenceClient({ address: inference.address, timeoutMs: 60_000, maxMessageBytes: 64 << 20, retryAfterSeconds: 1 });
    const input = imageToTensor(await sharp(photo).resize(1024, 1024, { fit: 'fill' }).removeAlpha().raw().toBuffer(), profile);
    let at50 = NaN;
    for (let i = 1; i <= total; i++) {
      await client.maskModel('isnet', profile)(input, new AbortController().signal);
      if (i === Math.min(50, total)) at50 = rssMb(inference.child.pid!, 'VmRSS');
    }
    const end = rssMb(inference.child.pid!, 'VmRSS');
    client.close();
    report.soak = { requests: total, rssAt50Mb: round(at50), rssAtEndMb: round(end), growthPercent: round(((end - at50) / at50) * 100) };
    console.log(`\nsoak: inference server RSS ${at50.toFixed(0)} MB at request ${Math.min(50, total)}, ${end.toFixed(0)} MB at request ${total} (${(((end - at50) / at50) * 100).toFixed(1)} %)`);
  }

  if (sections.has('balancing')) {
    const balancing = await balancingBench();
    report.balancing = balancing;
    printBalancingTable(balancing);
  }
} finally {
  await api.stop();
  for (const stop of alsoStop) await stop();
  await rawPool.close();
  await inference.stop();
}
if (values['cpu-prof']) {
  for (const file of (await readdir(values['cpu-prof'])).filter((f) => f.endsWith('.cpuprofile'))) {
    const summary = summarize(JSON.parse(await readFile(path.join(values['cpu-prof'], file), 'utf8')), 25);
    printSummary(summary, `API CPU profile ${file}`);
    await writeFile(path.join(values['cpu-prof'], file.replace(/\.cpuprofile$/, '.folded')), summary.folded);
  }
}
if (values.json) await writeFile(values.json, `${JSON.stringify(report, null, 2)}\n`);
process.exit(0);
