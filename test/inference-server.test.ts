import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadInferenceProto, type GRPCInferenceServiceClient } from '../src/protocol/index.js';
// The pool runs worker threads from compiled files, so it is tested from the build.
import { JobAbortedError, QueueFullError, SessionPool } from '../dist/src/inference-server/session-pool.js';
import { resolveModelFile } from '../dist/src/inference-server/model-source.js';
import { startInferenceProcess } from './helpers/inference-process.js';
import { settle } from './helpers/abort-storm.js';
import { metricValue } from './helpers/fuzz.js';

// The prepared ISNet the server runs by default: 8-bit NHWC pixels in, the 8-bit mask out.
const INPUT_BYTES = 1024 * 1024 * 3;
const FP32_INPUT_BYTES = 3 * 1024 * 1024 * 4;
const HealthClient = grpc.makeGenericClientConstructor(healthService, 'Health');

function inferenceClient(address: string): GRPCInferenceServiceClient {
  const Service = loadInferenceProto().inference.GRPCInferenceService;
  return new Service(address, grpc.credentials.createInsecure(), {
    'grpc.max_send_message_length': 64 << 20,
    'grpc.max_receive_message_length': 64 << 20,
  });
}

/** A 1024x1024 ModelInfer call; its default deadline is a backstop (~2 s on a quiet 2-core box, 25 s seen at load 30). */
function infer(client: GRPCInferenceServiceClient, deadlineMs = 120_000, raw = Buffer.alloc(INPUT_BYTES)) {
  return new Promise<{ error: grpc.ServiceError | null; shape?: number[]; bytes?: number }>((resolve) => {
    client.ModelInfer(
      {
        modelName: 'isnet',
        inputs: [{ name: 'image', datatype: 'UINT8', shape: [1, 1024, 1024, 3] }],
        outputs: [{ name: 'mask' }],
        rawInputContents: [raw],
      },
      { deadline: Date.now() + deadlineMs },
      (error, response) =>
        resolve({ error, shape: response?.outputs[0]?.shape.map(Number), bytes: response?.rawOutputContents[0]?.length }),
    );
  });
}

function healthCheck(client: grpc.Client, serviceName = ''): Promise<{ status: string; ms: number }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    (client as unknown as { Check: Function }).Check(
      { service: serviceName },
      { deadline: Date.now() + 5000 },
      (error: Error | null, response: { status: string }) =>
        error ? reject(error) : resolve({ status: response.status, ms: performance.now() - started }),
    );
  });
}

describe('inference server (shared instance, real model)', () => {
  let client: GRPCInferenceServiceClient;
  let health: grpc.Client;

  beforeAll(() => {
    client = inferenceClient(inject('inferenceAddress'));
    health = new HealthClient(inject('inferenceAddress'), grpc.credentials.createInsecure());
  });
  afterAll(() => {
    client.close();
    health.close();
  });

  it('speaks the Open Inference Protocol: live, ready, model metadata', async () => {
    const live = await new Promise<boolean>((r) => client.ServerLive({}, (_e, res) => r(Boolean(res?.live))));
    const ready = await new Promise<boolean>((r) => client.ServerReady({}, (_e, res) => r(Boolean(res?.ready))));
    const modelReady = await new Promise<boolean>((r) => client.ModelReady({ name: 'isnet' }, (_e, res) => r(Boolean(res?.ready))));
    expect([live, ready, modelReady]).toEqual([true, true, true]);
    const meta = await new Promise<any>((r, j) => client.ModelMetadata({ name: 'isnet' }, (e, res) => (e ? j(e) : r(res))));
    expect(meta.platform).toBe('onnxruntime_onnx');
    expect(meta.inputs).toMatchObject([{ name: 'image', datatype: 'UINT8', shape: [-1, -1, -1, 3] }]);
    expect(meta.outputs).toMatchObject([{ name: 'mask', datatype: 'UINT8', shape: [-1, 1, -1, -1] }]);
    expect(meta.versions).toEqual(['1']);
    expect(meta.properties.sha256).toMatch(/^[0-9a-f]{64}$/);
  });

  it('runs the model and returns only the requested output', async () => {
    const result = await infer(client);
    expect(result.error).toBeNull();
    expect(result.shape).toEqual([1, 1, 1024, 1024]);
    expect(result.bytes).toBe(1024 * 1024);
  });

  it('refuses malformed calls with INVALID_ARGUMENT or NOT_FOUND', async () => {
    const short = await infer(client, 5000, Buffer.alloc(100));
    expect(short.error?.code).toBe(grpc.status.INVALID_ARGUMENT);
    const unknown = await new Promise<grpc.ServiceError | null>((r) => client.ModelMetadata({ name: 'nope' }, (e) => r(e)));
    expect(unknown?.code).toBe(grpc.status.NOT_FOUND);
  });

  it('answers health checks while an inference is running, without waiting for it', async () => {
    const inferenceStarted = performance.now();
    const running = infer(client);
    let finishedAt = 0;
    void running.then(() => (finishedAt = performance.now()));
    // Event-based: check once the call is inside session.run, as the server's metrics say.
    await settle(
      async () => metricValue(await (await fetch(inject('inferenceMetricsUrl'))).text(), 'bgcut_inference_running'),
      (n) => n >= 1,
      30_000,
    );
    const checks: { status: string; ms: number; answeredDuringInference: boolean }[] = [];
    for (let i = 0; i < 3; i++) {
      const check = await healthCheck(health);
      checks.push({ ...check, answeredDuringInference: finishedAt === 0 });
    }
    const result = await running;
    expect(result.error).toBeNull();
    const inferenceMs = finishedAt - inferenceStarted;
    for (const check of checks) {
      expect(check.status).toBe('SERVING');
      // Answered while the model was still running, so not queued behind it; the bound in ms is
      // a margin for a busy machine, the event is the claim.
      expect(check.answeredDuringInference).toBe(true);
      expect(check.ms).toBeLessThan(Math.max(1000, inferenceMs / 2));
    }
  });
});

describe('inference server limits and lifecycle (own instance)', () => {
  it('reports NOT_SERVING and refuses ModelInfer until the model is loaded and warmed up, then SERVING', async () => {
    const server = await startInferenceProcess([], {}, 'listening');
    const health = new HealthClient(server.address, grpc.credentials.createInsecure());
    const client = inferenceClient(server.address);
    try {
      expect((await healthCheck(health)).status).toBe('NOT_SERVING');
      const early = await infer(client, 5000);
      expect(early.error?.code).toBe(grpc.status.UNAVAILABLE);
      // Health turns SERVING once every model it serves is ready (two by default, loaded one after
      // the other: well over 30 s on a busy 2-core box); the test's timeout bounds the wait.
      let status = 'NOT_SERVING';
      while (status !== 'SERVING') {
        await new Promise((r) => setTimeout(r, 100));
        status = (await healthCheck(health)).status;
      }
      expect(status).toBe('SERVING');
      expect(server.output()).toMatch(/ready in \d+ ms/);
    } finally {
      client.close();
      health.close();
      await server.stop();
    }
  }, 240_000); // an event wait bounded by the test timeout, not a timing claim

  it('answers RESOURCE_EXHAUSTED when every worker is busy and the queue is full', async () => {
    const server = await startInferenceProcess(['--queue', '0', '--metrics-port', '0']);
    const client = inferenceClient(server.address);
    try {
      const first = infer(client);
      // Event-based: the second call goes once the first is inside session.run, as the metrics say.
      await settle(
        async () => metricValue(await (await fetch(server.metricsUrl!)).text(), 'bgcut_inference_running'),
        (running) => running >= 1,
        30_000,
      );
      const second = await infer(client);
      expect(second.error?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
      expect((await first).error).toBeNull();
    } finally {
      client.close();
      await server.stop();
    }
  }, 180_000); // event waits (a server start and a whole inference on a busy box), not a timing claim

  it('on SIGTERM reports NOT_SERVING, refuses new calls, finishes the one in flight, exits 0', async () => {
    // A drain grace the in-flight 1024x1024 call fits on a busy box: with the default 30 s it was
    // cut off (CANCELLED) once at load 21, where one such inference took over 20 s.
    const server = await startInferenceProcess(['--metrics-port', '0', '--shutdown-grace-ms', '150000']);
    const client = inferenceClient(server.address);
    const health = new HealthClient(server.address, grpc.credentials.createInsecure());
    try {
      expect((await healthCheck(health, 'inference.GRPCInferenceService')).status).toBe('SERVING');
      const inFlight = infer(client);
      // Event-based: SIGTERM once the call is inside session.run, as the server's metrics say.
      await settle(
        async () => metricValue(await (await fetch(server.metricsUrl!)).text(), 'bgcut_inference_running'),
        (running) => running >= 1,
        30_000,
      );
      let finished = false;
      void inFlight.then(() => (finished = true));
      // Health watchers (as a load balancer holds them) opened before the signal: a draining server
      // refuses new calls, Check included, so they are how its NOT_SERVING is seen.
      const watch = (service: string) => {
        const call = (health as unknown as { Watch: Function }).Watch({ service }) as grpc.ClientReadableStream<{ status: string }>;
        const statuses: string[] = [];
        const notServing = new Promise<boolean>((resolve) => {
          call.on('data', (message: { status: string }) => {
            statuses.push(message.status);
            if (message.status === 'NOT_SERVING') {
              resolve(!finished);
              call.cancel(); // let the drain finish
            }
          });
          call.on('error', () => resolve(false));
        });
        return { statuses, notServing };
      };
      const watchers = [watch(''), watch('inference.GRPCInferenceService')];
      await settle(async () => watchers.every((w) => w.statuses.length > 0), (ok) => ok, 10_000);
      const exited = new Promise<number | null>((r) => server.child.once('exit', (code) => r(code)));
      server.child.kill('SIGTERM');
      // While it drains: health turns NOT_SERVING (the server and the service) with the call still running.
      const turnedWhileRunning = await Promise.all(watchers.map((w) => w.notServing));
      expect(watchers.map((w) => w.statuses)).toEqual([
        ['SERVING', 'NOT_SERVING'],
        ['SERVING', 'NOT_SERVING'],
      ]);
      expect(turnedWhileRunning).toEqual([true, true]);
      const late = await infer(client, 5000);
      expect(late.error?.code).toBe(grpc.status.UNAVAILABLE);
      const result = await inFlight;
      expect(result.error).toBeNull();
      expect(result.shape).toEqual([1, 1, 1024, 1024]);
      expect(await exited).toBe(0);
      expect(server.output()).toContain('SIGTERM');
    } finally {
      client.close();
      health.close();
      await server.stop();
    }
  }, 180_000); // event waits (a server start and a whole inference on a busy box), not a timing claim
});

describe('session pool', () => {
  let pool: SessionPool;
  // ISNet as shipped: the pool runs any ONNX file.
  const input = () => [{ name: 'input', datatype: 'FP32' as const, shape: [1, 3, 1024, 1024], data: new ArrayBuffer(FP32_INPUT_BYTES) }];

  beforeAll(async () => {
    pool = new SessionPool({ modelFile: await resolveModelFile('isnet-fp16'), providers: ['cpu'], workers: 1, intraOpThreads: 2, maxQueue: 2 });
    await pool.start();
  });
  afterAll(() => pool.close());

  it('never starts a job whose caller gave up while it was queued', async () => {
    const first = pool.run(input(), ['output']);
    const abort = new AbortController();
    const second = pool.run(input(), ['output'], abort.signal);
    const startedBefore = pool.stats.started;
    abort.abort();
    await expect(second).rejects.toBeInstanceOf(JobAbortedError);
    await first;
    expect(pool.stats.started).toBe(startedBefore);
    expect(pool.stats.dropped).toBe(1);
  }, 180_000); // a whole 1024x1024 inference on a busy box

  it('refuses a job when the queue is full', async () => {
    const running = [pool.run(input(), ['output']), pool.run(input(), ['output']), pool.run(input(), ['output'])];
    await expect(pool.run(input(), ['output'])).rejects.toBeInstanceOf(QueueFullError);
    await Promise.all(running);
  }, 180_000); // three whole 1024x1024 inferences on a busy box

  it('refuses a job whose signal already aborted', async () => {
    await expect(pool.run(input(), ['output'], AbortSignal.abort())).rejects.toBeInstanceOf(JobAbortedError);
  });
});
