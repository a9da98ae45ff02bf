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
  const { values } = parseArgs({ options: { side: { type: 'string', default: '1024' }, calls: { type: 'string', default: '100' }, rounds: { type: 'string', default: '5' }, cli: { type: 'string' }, client: { type: 'string', default: 'api' } } });
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

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
