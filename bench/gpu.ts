/**
 * npm run bench:gpu [-- --image photo.jpg] [--only raw,server,e2e,host] [--servers 2] [--api-processes 1,6,12] [--model isnet | --model isnet=/path/model.onnx] [--providers cuda]
 *                     [--runs 20] [--batches 1,4,8] [--clients 1,4,8]
 *
 * What a GPU host needs to know, measured side by side in one run on the host itself:
 * - raw: `session.run` of the prepared model on the provider, in a worker thread with the server's
 *   session options (the SessionPool itself), at batch 1, 4 and 8: ms per run, images per second;
 * - server: images per second through the inference server's ModelInfer from 1, 4 and 8
 *   concurrent callers, with dynamic batching (--max-batch 4, the default on an accelerator) and without (--max-batch 1), and the
 *   mean batch the server ran (its `batch_size` response parameter);
 * - host (asked by name): `--servers` inference servers and `--api-processes` API processes behind one
 *   port (examples/cluster.js through bgcut-launch), many clients for `--seconds`: images/s of the
 *   host and the API tier's CPU per image;
 * - e2e: a ~1 MP photo through the whole API (examples/express-app through bgcut-launch) one request at a time (p50,
 *   p99) and from the largest --clients count at once (images per second), and the API process's CPU per image,
 *   the figure that says how many API cores one GPU needs.
 * The run fails rather than falling back: the server is started with exactly `--providers`.
 */
import * as grpc from '@grpc/grpc-js';
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import sharp from 'sharp';
import { FileKeyStore } from '../src/core/index.js';
import { resolveModelFile } from '../src/inference-server/model-source.js';
import { SessionPool } from '../src/inference-server/session-pool.js';
import { loadInferenceProto } from '../src/protocol/index.js';
import { startInferenceProcess } from '../test/helpers/inference-process.js';
import { objectOnTexture } from '../test/helpers/synthetic-image.js';

// As `npm start` runs the API beside its own server: tensors through /dev/shm (both sides must
// allow it). BGCUT_INFERENCE_SHARED_MEMORY=off in the environment measures the wire instead.
process.env.BGCUT_INFERENCE_ALLOW_CLIENT_SHM ??= 'true';
process.env.BGCUT_INFERENCE_SHARED_MEMORY ??= 'auto';
// And a lone request's PNG in up to 3 row bands while cores are idle, as npm start encodes it.
process.env.BGCUT_PNG_BANDS ??= '3';

const { values } = parseArgs({
  options: {
    image: { type: 'string' },
    model: { type: 'string', default: 'isnet' },
    providers: { type: 'string', default: 'cuda' },
    runs: { type: 'string', default: '20' },
    batches: { type: 'string', default: '1,4,8' },
    clients: { type: 'string', default: '1,4,8' },
    size: { type: 'string', default: '1024' },
    only: { type: 'string', default: 'raw,server,e2e' },
    servers: { type: 'string', default: '2' },
    'api-processes': { type: 'string', default: '1,4,8,12' },
    seconds: { type: 'string', default: '10' },
    trace: { type: 'boolean', default: false },
  },
});
const runs = Number(values.runs);
if (!Number.isInteger(runs) || runs < 5) throw new Error('--runs must be at least 5');
const batches = values.batches!.split(',').map(Number);
const clientCounts = values.clients!.split(',').map(Number);
const size = Number(values.size);
const sections = new Set(values.only!.split(','));
const providers = values.providers!.split(',');
const [modelName, modelSource] = values.model!.includes('=') ? (values.model!.split('=') as [string, string]) : [values.model!, values.model!];

const median = (xs: number[]) => percentile(xs, 50);
function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  const rank = (p / 100) * (s.length - 1);
  const lo = Math.floor(rank);
  return s[lo]! + (s[Math.min(s.length - 1, lo + 1)]! - s[lo]!) * (rank - lo);
}
const round = (x: number) => Math.round(x * 10) / 10;
/** User + system CPU time of a process so far, in ms (Linux /proc, 1/100 s ticks). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}
/** The process and all its descendants (the launcher's child, the cluster's workers), from /proc. */
function processTree(root: number): number[] {
  const parents = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      parents.set(Number(entry), Number(readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]));
    } catch {
      // ended while listing
    }
  }
  const tree = [root];
  for (let i = 0; i < tree.length; i++) for (const [pid, ppid] of parents) if (ppid === tree[i]) tree.push(pid);
  return tree;
}
const treeCpuMs = (pids: number[]) => pids.reduce((sum, pid) => { try { return sum + cpuMs(pid); } catch { return sum; } }, 0);

const photo = values.image ? await readFile(values.image) : (await objectOnTexture(1224, 816)).bytes;
const pixels = await sharp(photo).autoOrient().removeAlpha().resize(size, size, { fit: 'fill', kernel: 'lanczos3' }).raw().toBuffer();
const report: Record<string, unknown> = { providers, model: values.model, size, cpus: `${os.cpus()[0]?.model} x${os.cpus().length}` };
console.log(`bench:gpu on ${report.cpus}, providers ${providers.join(',')}, model ${values.model}, input ${size}x${size}`);

/** `n` copies of the photo's pixels, stacked on the batch axis. */
function stacked(n: number) {
  const data = new Uint8Array(n * pixels.length);
  for (let i = 0; i < n; i++) data.set(pixels, i * pixels.length);
  return { name: 'image', datatype: 'UINT8' as const, shape: [n, size, size, 3], data: data.buffer };
}

/** A key store with one key on a plan without practical limits, for the API processes below. */
async function benchAccount() {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-bench-gpu-'));
  const keyStore = new FileKeyStore({ file: path.join(dir, 'keys.json') });
  const { key } = await keyStore.createKey({ accountId: 'bench', plan: 'bench' });
  await writeFile(path.join(dir, 'plans.json'), JSON.stringify({ plans: { bench: { requestsPerMinute: 10_000_000, maxConcurrent: 100_000 } } }));
  return { key, keysFile: path.join(dir, 'keys.json'), plansFile: path.join(dir, 'plans.json') };
}

/**
 * An example app through bgcut-launch, as `npm start` runs the API (its malloc settings decide
 * sharp's threads), on a random port against `inferenceAddress`; resolves once `processes` API
 * processes say they listen. The API asks for the model the servers serve, on every pass.
 */
async function startApi(example: string, account: { key: string; keysFile: string; plansFile: string }, inferenceAddress: string, processes = 1) {
  const port = 20000 + Math.floor(Math.random() * 20000);
  const child = spawn(process.execPath, [fileURLToPath(new URL('../src/runtime/launch.js', import.meta.url)), fileURLToPath(new URL(`../examples/${example}`, import.meta.url))], {
    env: { ...process.env, PORT: String(port), BGCUT_API_PROCESSES: String(processes), BGCUT_KEYS_FILE: account.keysFile, BGCUT_PLANS_FILE: account.plansFile, BGCUT_INFERENCE_ADDRESS: inferenceAddress, BGCUT_MODEL_PROFILE: 'isnet', BGCUT_MODELS: modelName, BGCUT_MODE_MODELS: 'off' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    let listening = 0;
    // Keeps reading the access log after start, so the pipe never fills.
    child.stdout!.on('data', (chunk: Buffer) => {
      listening += (chunk.toString().match(/listening on/g) ?? []).length;
      if (listening >= processes) resolve();
    });
    child.once('exit', (code) => reject(new Error(`API exited with ${code}`)));
  });
  return {
    child,
    /** One POST of the photo; resolves with its wall time in ms, throws on any status but 200. */
    post: async () => {
      const form = new FormData();
      form.append('file', new Blob([photo], { type: 'image/jpeg' }), 'photo.jpg');
      const started = performance.now();
      const response = await fetch(`http://127.0.0.1:${port}/v1/remove-bg`, { method: 'POST', headers: { 'x-api-key': account.key }, body: form });
      await response.arrayBuffer();
      if (response.status !== 200) throw new Error(`HTTP ${response.status}`);
      return performance.now() - started;
    },
    stop: () => new Promise<void>((done) => { child.once('exit', () => done()); child.kill('SIGTERM'); }),
  };
}

// raw: the session as the server runs it (worker thread, same options), batch by batch.
if (sections.has('raw')) {
  const modelFile = await resolveModelFile(modelSource);
  const pool = new SessionPool({ modelFile, providers, workers: 1, intraOpThreads: Math.min(8, os.availableParallelism()), maxQueue: 1 });
  const signature = await pool.start();
  if (signature.provider !== providers[0]) throw new Error(`session opened on ${signature.provider}, not ${providers[0]}: ${JSON.stringify(signature.skipped)}`);
  const rows: Record<string, unknown>[] = [];
  // The first run of each shape is reported apart: on CUDA it includes cuDNN's algorithm search.
  console.log('\nraw session.run (worker thread, server options)\n| batch | first run of the shape, ms | ms per run (median) | images/s |\n|---|---|---|---|');
  for (const batch of batches) {
    const firstRunMs = round((await pool.run([stacked(batch)], ['mask'])).runMs);
    for (let i = 0; i < 2; i++) await pool.run([stacked(batch)], ['mask']);
    const ms: number[] = [];
    for (let i = 0; i < runs; i++) ms.push((await pool.run([stacked(batch)], ['mask'])).runMs);
    const row = { batch, firstRunMs, msPerRun: round(median(ms)), imagesPerSecond: round((batch * 1000) / median(ms)) };
    rows.push(row);
    console.log(`| ${batch} | ${firstRunMs} | ${row.msPerRun} | ${row.imagesPerSecond} |`);
  }
  report.raw = rows;
  await pool.close();
}

// server: ModelInfer from concurrent callers, with and without dynamic batching.
async function serverThroughput(maxBatch: number) {
  const server = await startInferenceProcess(['--providers', providers.join(','), '--model', `${modelName}=${modelSource}`, '--max-batch', String(maxBatch), '--queue', '64', '--threads', '8']);
  const Service = loadInferenceProto().inference.GRPCInferenceService;
  const client = new Service(server.address, grpc.credentials.createInsecure(), { 'grpc.max_receive_message_length': 64 << 20, 'grpc.max_send_message_length': 64 << 20 });
  const one = stacked(1);
  const infer = () =>
    new Promise<{ ms: number; batch: number; runMs: number; at: number }>((resolve, reject) => {
      const started = performance.now();
      client.ModelInfer(
        { modelName, inputs: [{ name: one.name, datatype: one.datatype, shape: one.shape }], outputs: [{ name: 'mask' }], rawInputContents: [Buffer.from(one.data)] },
        { deadline: Date.now() + 60_000 },
        (error, response) => {
          if (error) return reject(error);
          resolve({
            ms: performance.now() - started,
            batch: Number(response!.parameters?.batch_size?.int64Param ?? 1),
            runMs: Number(response!.parameters?.session_run_us?.int64Param ?? 0) / 1000,
            at: started,
          });
        },
      );
    });
  const rows: Record<string, unknown>[] = [];
  try {
    for (let i = 0; i < 5; i++) await infer();
    for (const clients of clientCounts) {
      const perClient = Math.max(runs, 2 * clients);
      const results: { ms: number; batch: number; runMs: number; at: number }[] = [];
      const started = performance.now();
      await Promise.all(
        Array.from({ length: clients }, async () => {
          for (let i = 0; i < perClient; i++) results.push(await infer());
        }),
      );
      const seconds = (performance.now() - started) / 1000;
      if (values.trace) {
        for (const r of results.slice(0, 16)) console.log(`trace max-batch ${maxBatch} callers ${clients}: sent at +${round(r.at - started)} ms, batch ${r.batch}, session.run ${round(r.runMs)} ms, call ${round(r.ms)} ms`);
      }
      rows.push({
        meanSessionRunMs: round(results.reduce((a, r) => a + r.runMs, 0) / results.length),
        maxBatch,
        clients,
        imagesPerSecond: round(results.length / seconds),
        p50Ms: round(median(results.map((r) => r.ms))),
        p99Ms: round(percentile(results.map((r) => r.ms), 99)),
        meanBatch: round(results.reduce((a, r) => a + r.batch, 0) / results.length),
      });
    }
  } finally {
    client.close();
    await server.stop();
  }
  return rows;
}
if (sections.has('server')) {
  const rows = [...(await serverThroughput(4)), ...(await serverThroughput(1))];
  report.server = rows;
  console.log('\nModelInfer through the inference server (1 image per call)\n| max batch | callers | images/s | p50 ms | p99 ms | mean batch run | mean session.run ms |\n|---|---|---|---|---|---|---|');
  for (const r of rows) console.log(`| ${r.maxBatch} | ${r.clients} | ${r.imagesPerSecond} | ${r.p50Ms} | ${r.p99Ms} | ${r.meanBatch} | ${r.meanSessionRunMs} |`);
}

// e2e: the whole API in front of a batching server.
if (sections.has('e2e')) {
  const account = await benchAccount();
  const server = await startInferenceProcess(['--providers', providers.join(','), '--model', `${modelName}=${modelSource}`, '--queue', '64', '--threads', '8']);
  const api = await startApi('express-app.js', account, server.address);
  try {
    const meta = await sharp(photo).metadata();
    for (let i = 0; i < 10; i++) await api.post();
    const pids = processTree(api.child.pid!);
    const cpu0 = treeCpuMs(pids);
    const single: number[] = [];
    for (let i = 0; i < runs; i++) single.push(await api.post());
    const cpuSingle = (treeCpuMs(pids) - cpu0) / runs;
    const clients = Math.max(...clientCounts);
    const perClient = runs;
    const cpu1 = treeCpuMs(pids);
    const started = performance.now();
    await Promise.all(Array.from({ length: clients }, async () => { for (let i = 0; i < perClient; i++) await api.post(); }));
    const seconds = (performance.now() - started) / 1000;
    const cpuConcurrent = (treeCpuMs(pids) - cpu1) / (clients * perClient);
    report.e2e = {
      image: `${meta.width}x${meta.height}`,
      p50Ms: round(median(single)),
      p99Ms: round(percentile(single, 99)),
      imagesPerSecondConcurrent: round((clients * perClient) / seconds),
      apiCpuMsPerImage: round(cpuSingle),
      apiCpuMsPerImageConcurrent: round(cpuConcurrent),
    };
    console.log(`\nend to end through the API (${meta.width}x${meta.height}, PNG cutout)\n| measure | value |\n|---|---|`);
    for (const [k, v] of Object.entries(report.e2e as object)) console.log(`| ${k} | ${v} |`);
  } finally {
    await api.stop();
    await server.stop();
  }
}

// host: one GPU host as it would be deployed: `--servers` inference servers on the GPU (one
// main thread each receives the ModelInfer calls), and the API as several processes behind one
// port (examples/cluster.js through bgcut-launch, as `npm start` runs the API), fed by many
// clients for `--seconds`. Reports images/s of the host and the API tier's CPU per image (every
// API process's user + system time, from /proc).
if (sections.has('host')) {
  const account = await benchAccount();
  const serverCount = Number(values.servers);
  const servers = [];
  for (let i = 0; i < serverCount; i++) servers.push(await startInferenceProcess(['--providers', providers.join(','), '--model', `${modelName}=${modelSource}`, '--queue', '256', '--threads', '4']));
  const target = servers.length === 1 ? servers[0]!.address : `ipv4:${servers.map((s) => s.address).join(',')}`;
  const rows: Record<string, unknown>[] = [];
  console.log(`\nhost: ${serverCount} inference server(s), API processes behind one port (${Math.round(photo.length / 1024)} KiB JPEG, PNG cutout)\n| API processes | clients | images/s | p50 ms | p99 ms | API CPU ms/image | one-at-a-time p50 / p99 ms |\n|---|---|---|---|---|---|---|`);
  try {
    for (const processes of values['api-processes']!.split(',').map(Number)) {
      const api = await startApi('cluster.js', account, target, processes);
      try {
        const clients = Math.max(8, 4 * processes);
        // Warm every process (each has its own pixel pool and connections).
        await Promise.all(Array.from({ length: clients }, async () => { for (let i = 0; i < 3; i++) await api.post(); }));
        let single = '';
        if (processes === 1) {
          const ms: number[] = [];
          for (let i = 0; i < runs; i++) ms.push(await api.post());
          single = `${round(median(ms))} / ${round(percentile(ms, 99))}`;
        }
        const pids = processTree(api.child.pid!);
        const cpu0 = treeCpuMs(pids);
        const ms: number[] = [];
        const started = performance.now();
        const until = started + Number(values.seconds) * 1000;
        await Promise.all(Array.from({ length: clients }, async () => { while (performance.now() < until) ms.push(await api.post()); }));
        const seconds = (performance.now() - started) / 1000;
        const cpuPerImage = (treeCpuMs(pids) - cpu0) / ms.length;
        const row = { processes, clients, imagesPerSecond: round(ms.length / seconds), p50Ms: round(median(ms)), p99Ms: round(percentile(ms, 99)), apiCpuMsPerImage: round(cpuPerImage), single };
        rows.push(row);
        console.log(`| ${processes} | ${clients} | ${row.imagesPerSecond} | ${row.p50Ms} | ${row.p99Ms} | ${row.apiCpuMsPerImage} | ${single} |`);
      } finally {
        await api.stop();
      }
    }
  } finally {
    for (const server of servers) await server.stop();
  }
  report.host = { servers: serverCount, rows };
}
console.log(`\n${JSON.stringify(report)}`);
