/**
 * CPU of the API's inference thread (src/core/inference/inference-thread.ts) per ModelInfer call,
 * against an in-process gRPC server that answers at once: the thread's own cost (grpc-js's framing
 * copy of a 3 MiB message, HTTP/2 writes and reads, the 1 MiB answer's decode and its copy into
 * shared memory), without a model. Read from /proc: the OS thread the client started.
 * What one thread can carry: 1000 / (ms per call) calls a second.
 *
 *   node dist/bench/inference-thread-cpu.js [calls, default 400]
 */
import * as grpc from '@grpc/grpc-js';
import { readdirSync, readFileSync } from 'node:fs';
import { ISNET_PROFILE } from '../src/core/image/profile.js';
import { InferenceClient } from '../src/core/inference/inference-client.js';
import { allocateInferMessage, loadInferenceProto, type GRPCInferenceServiceHandlers } from '../src/protocol/index.js';

const calls = Number(process.argv[2] ?? 400);
const tasks = () => new Set(readdirSync('/proc/self/task'));
/** User + system CPU ms of one of this process's threads (Linux reports 1/100 s). */
const cpuMs = (tid: string) => {
  const fields = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
};

const mask = Buffer.alloc(1024 * 1024, 7);
const server = new grpc.Server({ 'grpc.max_receive_message_length': 64 << 20 });
const handlers = {
  ModelInfer(_call: unknown, callback: grpc.sendUnaryData<unknown>) {
    callback(null, { modelName: 'isnet', outputs: [{ name: ISNET_PROFILE.outputName, datatype: 'UINT8', shape: [1, 1, 1024, 1024] }], rawOutputContents: [mask] });
  },
} as unknown as GRPCInferenceServiceHandlers;
server.addService(loadInferenceProto().inference.GRPCInferenceService.service, handlers);
const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));

const before = tasks();
const client = new InferenceClient({ address: `127.0.0.1:${port}`, timeoutMs: 60_000, maxMessageBytes: 64 << 20, retryAfterSeconds: 1 });
const profile = { ...ISNET_PROFILE, width: 1024, height: 1024, outputDatatype: 'UINT8' as const };
const model = client.maskModel('isnet', profile);
const size = { width: 1024, height: 1024 };
const prefix = model.prefix!(size);
const call = () => model({ ...allocateInferMessage(prefix, 3 * 1024 * 1024) }, new AbortController().signal, size);
await client.inferenceThreadCounts();
const started = [...tasks()].filter((t) => !before.has(t));
for (let i = 0; i < 20; i++) await call();
const threadCpu = () => started.reduce((sum, tid) => sum + cpuMs(tid), 0);
const cpu0 = threadCpu();
const t0 = performance.now();
// Four at a time, as the default inference slots allow.
await Promise.all(Array.from({ length: 4 }, async () => {
  for (let i = 0; i < calls / 4; i++) await call();
}));
const perCall = (threadCpu() - cpu0) / calls;
console.log(`inference thread: ${started.length} OS thread(s) started by the client; ${perCall.toFixed(2)} ms CPU per call (3 MiB in, 1 MiB out, ${calls} calls, 4 at a time, wall ${((performance.now() - t0) / calls).toFixed(1)} ms per call): one thread carries ~${Math.round(1000 / perCall)} calls/s`);
await client.close();
server.forceShutdown();
