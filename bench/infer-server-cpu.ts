/**
 * The inference server's own CPU per ModelInfer call, with a model that does no compute (an
 * identity UINT8[1, side, side, 3]: the worker's session.run only copies), so what is left is the
 * server's gRPC receive and decode of the request, the hand-off of the tensor to the session
 * worker, the answer back and its encoding. One caller, calls one after another, a raw tensor of
 * side² × 3 bytes each way (1024: 3 MiB, as ISNet's input).
 *
 * Reads /proc: the main thread's CPU (its task id is the process id) and the whole process's
 * (main thread + session worker + libuv), per call, as medians over rounds.
 *
 *   node dist/bench/infer-server-cpu.js [--side 1024] [--calls 100] [--rounds 5] [--cli path/to/cli.js] [--client api|plain]
 *
 * The caller is a channel as the API makes it (core/inference/grpc-channel.ts: its limits and
 * HTTP/2 windows), or with `--client plain` one with grpc-js's defaults. `wallMsPerCall` is the
 * call's latency seen by the caller: with session.run a copy, the time the two processes take
 * to move 3 MiB each way.
 *
 * `--shared-memory`: the API's own inference client (InferenceClient: its inference thread, the
 * message a pixel worker would lay out, moved to the thread) against one server started with
 * `--allow-client-shm true`, over the wire (`sharedMemory: 'off'`) and through /dev/shm
 * (`'auto'`, shared-memory-ring.ts), rounds alternating, in one run; adds the client process's
 * CPU per call (main thread + inference thread).
 *
 * BENCH_SERVER_NODE_ARGS adds node flags to the server (e.g. `--cpu-prof`).
 * `--cli` runs another build of the server (an A/B against a checkout of the previous commit).
 */
import * as grpc from '@grpc/grpc-js';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { untilInferenceServerReady } from './child-ready.js';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { spawn } from 'node:child_process';
import { allocateInferMessage, EncodedInferRequest, inferenceClientConstructor, inferRequestPrefix, modelInferRequestEncoder } from '../src/protocol/index.js';
import { writeIdentityModel } from '../test/helpers/identity-model.js';
import { createServiceClient } from '../src/core/inference/grpc-channel.js';
import { InferenceClient } from '../src/core/inference/inference-client.js';

const TICK_MS = 1000 / 100; // USER_HZ is 100 on Linux

async function cpuMs(file: string): Promise<number> {
  const fields = (await readFile(file, 'utf8')).split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * TICK_MS; // utime, stime
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { side: { type: 'string', default: '1024' }, calls: { type: 'string', default: '100' }, rounds: { type: 'string', default: '5' }, cli: { type: 'string' }, client: { type: 'string', default: 'api' }, 'shared-memory': { type: 'boolean', default: false } },
  });
  if (values['shared-memory']) return compareSharedMemory(Number(values.side), Number(values.calls), Number(values.rounds), values.cli);
  const side = Number(values.side);
  const calls = Number(values.calls);
  const rounds = Number(values.rounds);
  const cli = values.cli ?? new URL('../src/inference-server/cli.js', import.meta.url).pathname;
  const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-infer-cpu-'));
  const model = await writeIdentityModel(dir, side);
  const child = spawn(process.execPath, [...(process.env.BENCH_SERVER_NODE_ARGS?.split(' ').filter(Boolean) ?? []), cli, '--port', '0', '--model', `tiny=${model}`, '--workers', '1', '--threads', '1'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const port = await untilInferenceServerReady(child);
  // The API's channel (its options: limits, windows, retries), or grpc-js's defaults (`--client plain`).
  const client =
    values.client === 'plain'
      ? new (inferenceClientConstructor())(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), { 'grpc.max_receive_message_length': -1, 'grpc.max_send_message_length': -1 })
      : createServiceClient({ address: `127.0.0.1:${port}`, maxMessageBytes: 64 << 20 });
  const bytes = side * side * 3;
  const prefix = inferRequestPrefix(modelInferRequestEncoder(), { modelName: 'tiny', inputs: [{ name: 'x', datatype: 'UINT8', shape: [1, side, side, 3] }] }, bytes);
  const call = () =>
    new Promise<void>((resolve, reject) => {
      const { message, tensor } = allocateInferMessage(prefix, bytes);
      tensor.fill(7);
      client.ModelInfer(new EncodedInferRequest(message) as never, { deadline: Date.now() + 60_000 }, (error, response) => {
        if (error) reject(error);
        else if (response!.rawOutputContents![0]!.length !== bytes) reject(new Error('short answer'));
        else resolve();
      });
    });
  const main = `/proc/${child.pid}/task/${child.pid}/stat`;
  const whole = `/proc/${child.pid}/stat`;
  const mainPerCall: number[] = [];
  const wholePerCall: number[] = [];
  const wallPerCall: number[] = [];
  try {
    for (let i = 0; i < 10; i++) await call(); // warm-up
    for (let round = 0; round < rounds; round++) {
      const [m0, w0, t0] = [await cpuMs(main), await cpuMs(whole), performance.now()];
      for (let i = 0; i < calls; i++) await call();
      const [m1, w1, t1] = [await cpuMs(main), await cpuMs(whole), performance.now()];
      mainPerCall.push((m1 - m0) / calls);
      wholePerCall.push((w1 - w0) / calls);
      wallPerCall.push((t1 - t0) / calls);
    }
  } finally {
    client.close();
    child.kill('SIGTERM');
    await rm(dir, { recursive: true, force: true });
  }
  const r = (x: number) => Math.round(x * 100) / 100;
  console.log(JSON.stringify({ cli, client: values.client, side, tensorBytes: bytes, calls, rounds, mainThreadMsPerCall: r(median(mainPerCall)), processMsPerCall: r(median(wholePerCall)), wallMsPerCall: r(median(wallPerCall)), rawMain: mainPerCall.map(r), rawProcess: wholePerCall.map(r), loadavg: os.loadavg().map(r) }));
}

/** Wire and shared memory through the API's InferenceClient, rounds alternating against one server. */
async function compareSharedMemory(side: number, calls: number, rounds: number, cliArg: string | undefined): Promise<void> {
  const cli = cliArg ?? new URL('../src/inference-server/cli.js', import.meta.url).pathname;
  const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-infer-cpu-'));
  const model = await writeIdentityModel(dir, side);
  const child = spawn(process.execPath, [cli, '--port', '0', '--model', `tiny=${model}`, '--workers', '1', '--threads', '1', '--allow-client-shm', 'true'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const port = await untilInferenceServerReady(child);
  const bytes = side * side * 3;
  const shape = [1, side, side, 3];
  const make = (sharedMemory: 'auto' | 'off') => new InferenceClient({ address: `127.0.0.1:${port}`, timeoutMs: 60_000, maxMessageBytes: 64 << 20, retryAfterSeconds: 1, sharedMemory });
  const clients = { wire: make('off'), shm: make('auto') };
  const header = { modelName: 'tiny', inputs: [{ name: 'x', datatype: 'UINT8', shape }], outputs: [{ name: 'y' }] };
  const call = async (c: InferenceClient) => {
    // As the pixel pool lays it out: the tensor written once into a message made for this call, moved to the thread.
    const { message, tensor } = allocateInferMessage(c.requestPrefix(header, bytes), bytes);
    tensor.fill(7);
    const result = await c.infer('tiny', { name: 'x', datatype: 'UINT8', shape, data: { message, tensor, sendOnce: true } }, { name: 'y', datatype: 'UINT8' }, new AbortController().signal);
    if (result.data.length !== bytes) throw new Error('short answer');
  };
  const mainStat = `/proc/${child.pid}/task/${child.pid}/stat`;
  const whole = `/proc/${child.pid}/stat`;
  const samples = { wire: [] as number[][], shm: [] as number[][] };
  try {
    for (const c of Object.values(clients)) for (let i = 0; i < 10; i++) await call(c); // warm-up (the ring registers its slot)
    for (let round = 0; round < rounds; round++) {
      for (const mode of ['wire', 'shm'] as const) {
        const c = clients[mode];
        const before = [await cpuMs(mainStat), await cpuMs(whole), process.cpuUsage(), performance.now()] as const;
        for (let i = 0; i < calls; i++) await call(c);
        const after = [await cpuMs(mainStat), await cpuMs(whole), process.cpuUsage(before[2]), performance.now()] as const;
        samples[mode].push([(after[0] - before[0]) / calls, (after[1] - before[1]) / calls, (after[2].user + after[2].system) / 1000 / calls, (after[3] - before[3]) / calls]);
      }
    }
    const shmCounts = (await clients.shm.inferenceThreadCounts()).sharedMemory;
    const r = (x: number) => Math.round(x * 100) / 100;
    const summary = (rows: number[][]) => ({
      wallMsPerCall: r(median(rows.map((x) => x[3]!))),
      serverMainMsPerCall: r(median(rows.map((x) => x[0]!))),
      serverProcessMsPerCall: r(median(rows.map((x) => x[1]!))),
      clientProcessMsPerCall: r(median(rows.map((x) => x[2]!))),
      raw: rows.map((x) => x.map(r)),
    });
    console.log(JSON.stringify({ cli, side, tensorBytes: bytes, calls, rounds, wire: summary(samples.wire), shm: summary(samples.shm), shmCounts, loadavg: os.loadavg().map(r) }));
  } finally {
    await Promise.all(Object.values(clients).map((c) => c.close()));
    child.kill('SIGTERM');
    await rm(dir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
