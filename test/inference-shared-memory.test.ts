/**
 * The API's inference client through shared memory (shared-memory-ring.ts) with real servers on
 * loopback: tensors through /dev/shm slots when the server offers Triton's extension, the same
 * masks as over the wire with the real model, the wire whenever the server refuses, and no
 * /dev/shm object left once the client is closed.
 */
import * as grpc from '@grpc/grpc-js';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allocateInferMessage, loadInferenceProto } from '../src/protocol/index.js';
import { COLLECT_AFTER_BYTES } from '../src/core/inference/inference-thread.js';
import { InferenceClient } from '../src/core/inference/inference-client.js';
import { isLoopbackAddress } from '../src/core/inference/shared-memory-ring.js';
import { startInferenceProcess, type InferenceProcess } from './helpers/inference-process.js';
import { writeIdentityModel } from './helpers/identity-model.js';
import { objectOnTexture } from './helpers/synthetic-image.js';

const SIDE = 64;
/** A second identity model, whose 768 KiB tensors pass COLLECT_AFTER_BYTES in a dozen calls. */
const BIG = 512;
const output = { name: 'y', datatype: 'UINT8' as const };
const ownFiles = () => readdirSync('/dev/shm').filter((name) => name.startsWith(`bgcut-api-${process.pid}-`));

function client(address: string, sharedMemory: 'auto' | 'off', maxMessageBytes = 1 << 20) {
  return new InferenceClient({ address, timeoutMs: 60_000, maxMessageBytes, retryAfterSeconds: 1, sharedMemory });
}

/** One call with a fresh random image of the identity model; resolves with the input and the answer. */
async function identityCall(c: InferenceClient, signal = new AbortController().signal) {
  const data = new Uint8Array(randomBytes(SIDE * SIDE * 3));
  const result = await c.infer('identity', { name: 'x', datatype: 'UINT8', shape: [1, SIDE, SIDE, 3], data }, output, signal);
  return { data, result };
}

/** Calls until the ring has registered a slot and served a call through it (slots are made in the background). */
async function untilThroughSharedMemory(c: InferenceClient) {
  for (let i = 0; i < 200; i++) {
    const { data, result } = await identityCall(c);
    expect(Buffer.compare(Buffer.from(result.data as Uint8Array), Buffer.from(data))).toBe(0);
    if ((await c.inferenceThreadCounts()).sharedMemory.calls > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error('no call went through shared memory');
}

describe('inference client through shared memory (identity model)', () => {
  let dir: string;
  let on: InferenceProcess;
  let on2: InferenceProcess;
  let slow: InferenceProcess;
  let off: InferenceProcess;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'bgcut-shm-client-'));
    const model = await writeIdentityModel(dir, SIDE);
    const big = await writeIdentityModel(mkdtempSync(path.join(dir, 'big-')), BIG);
    // A queue for the eight calls at once below (the default 4 refuses some while the one worker is slow on a busy box).
    const args = ['--model', `identity=${model}`, '--model', `big=${big}`, '--workers', '1', '--threads', '1', '--queue', '32'];
    [on, on2, off, slow] = await Promise.all([
      startInferenceProcess([...args, '--allow-client-shm', 'true']),
      startInferenceProcess([...args, '--allow-client-shm', 'true']),
      startInferenceProcess(args),
      // Each run holds its worker 400 ms longer: a call can be cancelled while the server holds its slot.
      startInferenceProcess([...args, '--allow-client-shm', 'true', '--test-run-delay-ms', '400']),
    ]);
  });
  afterAll(async () => {
    await Promise.all([on?.stop(), on2?.stop(), off?.stop(), slow?.stop()]);
    rmSync(dir, { recursive: true, force: true });
  });

  it('sends the tensors through /dev/shm slots, gets the same bytes back, and leaves no object after close()', async () => {
    const c = client(on.address, 'auto');
    try {
      await untilThroughSharedMemory(c);
      // Eight calls at once: each answer is its own input, whichever slot (or the wire) carried it.
      const calls = await Promise.all(Array.from({ length: 8 }, () => identityCall(c)));
      for (const { data, result } of calls) expect(Buffer.compare(Buffer.from(result.data as Uint8Array), Buffer.from(data))).toBe(0);
      const counts = (await c.inferenceThreadCounts()).sharedMemory;
      expect(counts.state).toBe('on');
      expect(counts.slots).toBeGreaterThan(0);
      expect(counts.slots).toBeLessThanOrEqual(8);
      expect(ownFiles().length).toBe(counts.slots);
    } finally {
      await c.close();
    }
    expect(ownFiles()).toEqual([]);
  });

  it('owes no collection for calls through a slot whose message was moved to the thread and freed there (the wire owes one per 8 MiB), and reads each mask into memory made ready after the call before', async () => {
    const c = client(on.address, 'auto', 4 << 20);
    const bytes = BIG * BIG * 3;
    const shape = [1, BIG, BIG, 3];
    const header = { modelName: 'big', inputs: [{ name: 'x', datatype: 'UINT8' as const, shape }], outputs: [{ name: 'y' }] };
    // As the pixel pool lays it out: the tensor written into a message made for this call, moved to the thread.
    const call = async () => {
      const { message, tensor } = allocateInferMessage(c.requestPrefix(header, bytes), bytes);
      tensor.fill(7);
      const result = await c.infer('big', { name: 'x', datatype: 'UINT8', shape, data: { message, tensor, sendOnce: true } }, output, new AbortController().signal);
      expect(result.data.length).toBe(bytes);
    };
    try {
      // Until a slot of this size is registered (made in the background; the calls before go over the wire).
      for (let i = 0; i < 200 && (await c.inferenceThreadCounts()).sharedMemory.calls === 0; i++) {
        await call();
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const before = await c.inferenceThreadCounts();
      expect(before.sharedMemory.calls).toBeGreaterThan(0);
      // Over COLLECT_AFTER_BYTES of messages: over the wire these owe a collection (inference-off-main-thread.test.ts).
      const calls = Math.floor(COLLECT_AFTER_BYTES / bytes) + 1;
      for (let i = 0; i < calls; i++) await call();
      const after = await c.inferenceThreadCounts();
      expect(after.sharedMemory.calls - before.sharedMemory.calls).toBe(calls);
      expect(after.released - before.released).toBe(calls);
      expect(after.collections - before.collections).toBe(0);
      // Each mask after the first of its size found its shared memory made ready after the call before (warm-memory.ts).
      expect(after.masksReady - before.masksReady).toBe(calls);
    } finally {
      await c.close();
    }
  }, 120_000);

  it('goes over the wire when the server does not offer the extension', async () => {
    const c = client(off.address, 'auto');
    try {
      for (let i = 0; i < 5; i++) {
        const { data, result } = await identityCall(c);
        expect(Buffer.compare(Buffer.from(result.data as Uint8Array), Buffer.from(data))).toBe(0);
      }
      const counts = (await c.inferenceThreadCounts()).sharedMemory;
      expect(counts.calls).toBe(0);
      expect(counts.state).toBe('refused');
      expect(ownFiles()).toEqual([]);
    } finally {
      await c.close();
    }
  });

  it('retries a call over the wire when the server refuses its region (it forgot the regions), and never uses shared memory with `off`', async () => {
    const c = client(on.address, 'auto');
    const Service = loadInferenceProto().inference.GRPCInferenceService;
    const admin = new Service(on.address, grpc.credentials.createInsecure());
    try {
      await untilThroughSharedMemory(c);
      // As a restarted server would: no region registered any more.
      await new Promise((resolve, reject) => admin.SystemSharedMemoryUnregister({ name: '' }, { deadline: Date.now() + 10_000 }, (e) => (e ? reject(e) : resolve(undefined))));
      const { data, result } = await identityCall(c);
      expect(Buffer.compare(Buffer.from(result.data as Uint8Array), Buffer.from(data))).toBe(0);
      const counts = (await c.inferenceThreadCounts()).sharedMemory;
      expect(counts.refused).toBe(1);
      expect(counts.state).toBe('refused');
      // The ring dropped its slots, and their objects with them.
      expect(counts.slots).toBe(0);
      expect(ownFiles()).toEqual([]);
    } finally {
      admin.close();
      await c.close();
    }
    const plain = client(on.address, 'off');
    try {
      await identityCall(plain);
      await identityCall(plain);
      const counts = (await plain.inferenceThreadCounts()).sharedMemory;
      expect(counts).toMatchObject({ state: 'off', calls: 0 });
    } finally {
      await plain.close();
    }
    expect(ownFiles()).toEqual([]);
  });

  it('removes its objects when the process exits without close()', async () => {
    // A process of its own (the build, as a host runs it): calls until one went through a slot, then exits.
    const script = `
      import { InferenceClient } from ${JSON.stringify(new URL('../dist/src/core/inference/inference-client.js', import.meta.url).href)};
      import { readdirSync } from 'node:fs';
      const c = new InferenceClient({ address: ${JSON.stringify(on.address)}, timeoutMs: 60000, maxMessageBytes: 1 << 20, retryAfterSeconds: 1, sharedMemory: 'auto' });
      const data = new Uint8Array(${SIDE * SIDE * 3});
      for (let i = 0; i < 200 && (await c.inferenceThreadCounts()).sharedMemory.calls === 0; i++) {
        await c.infer('identity', { name: 'x', datatype: 'UINT8', shape: [1, ${SIDE}, ${SIDE}, 3], data }, { name: 'y', datatype: 'UINT8' }, new AbortController().signal);
        await new Promise((r) => setTimeout(r, 20));
      }
      console.log(JSON.stringify({ calls: (await c.inferenceThreadCounts()).sharedMemory.calls, files: readdirSync('/dev/shm').filter((n) => n.startsWith('bgcut-api-' + process.pid + '-')).length }));
      process.exit(0);
    `;
    const file = path.join(dir, 'exits.mjs');
    writeFileSync(file, script);
    const child = spawn(process.execPath, [file], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).toBe(0);
    const seen = JSON.parse(out.trim()) as { calls: number; files: number };
    expect(seen.calls).toBeGreaterThan(0);
    expect(seen.files).toBeGreaterThan(0);
    expect(readdirSync('/dev/shm').filter((name) => name.startsWith(`bgcut-api-${child.pid}-`))).toEqual([]);
  });

  it('never reuses the slot of a call cancelled while the server held it: it is unregistered and removed', async () => {
    const c = client(slow.address, 'auto');
    const Service = loadInferenceProto().inference.GRPCInferenceService;
    const admin = new Service(slow.address, grpc.credentials.createInsecure());
    const regions = () =>
      new Promise<string[]>((resolve, reject) =>
        admin.SystemSharedMemoryStatus({ name: '' }, { deadline: Date.now() + 10_000 }, (e, r) => (e ? reject(e) : resolve(Object.keys(r!.regions).filter((n) => n.startsWith(`bgcut-api-${process.pid}-`))))),
      );
    try {
      await untilThroughSharedMemory(c);
      const [used] = await regions();
      expect(used).toBeDefined();
      const abort = new AbortController();
      const cancelled = identityCall(c, abort.signal);
      // Cancelled once the server holds it (its worker runs 400 ms longer than the call takes).
      setTimeout(() => abort.abort(new Error('client left')), 150);
      await expect(cancelled).rejects.toThrow();
      const counts = (await c.inferenceThreadCounts()).sharedMemory;
      expect(counts.slots).toBe(0);
      expect(ownFiles()).toEqual([]);
      // The next calls get a new slot under a new name; the old one is gone from the server too.
      await untilThroughSharedMemory(c);
      const now = await regions();
      expect(now).not.toContain(used);
      expect(now.length).toBe(1);
    } finally {
      admin.close();
      await c.close();
    }
    expect(ownFiles()).toEqual([]);
  });

  it('registers each slot with every server when balanced over several on this host', async () => {
    const c = new InferenceClient({ address: [on.address, on2.address], timeoutMs: 60_000, maxMessageBytes: 1 << 20, retryAfterSeconds: 1, sharedMemory: 'auto' });
    const Service = loadInferenceProto().inference.GRPCInferenceService;
    const admins = [on, on2].map((s) => new Service(s.address, grpc.credentials.createInsecure()));
    const regions = (admin: (typeof admins)[number]) =>
      new Promise<string[]>((resolve, reject) =>
        admin.SystemSharedMemoryStatus({ name: '' }, { deadline: Date.now() + 10_000 }, (e, r) => (e ? reject(e) : resolve(Object.keys(r!.regions).filter((n) => n.startsWith(`bgcut-api-${process.pid}-`))))),
      );
    try {
      await untilThroughSharedMemory(c);
      // Calls balanced over both servers, every answer its own input, each through a slot both know.
      for (let i = 0; i < 4; i++) {
        const calls = await Promise.all(Array.from({ length: 4 }, () => identityCall(c)));
        for (const { data, result } of calls) expect(Buffer.compare(Buffer.from(result.data as Uint8Array), Buffer.from(data))).toBe(0);
      }
      const counts = (await c.inferenceThreadCounts()).sharedMemory;
      expect(counts).toMatchObject({ state: 'on', refused: 0 });
      const [first, second] = await Promise.all(admins.map(regions));
      expect(first!.length).toBe(counts.slots);
      expect(second!.sort()).toEqual(first!.sort());
    } finally {
      await c.close();
    }
    // Unregistered from both on close.
    const after = await Promise.all(admins.map(regions));
    expect(after).toEqual([[], []]);
    for (const admin of admins) admin.close();
    expect(ownFiles()).toEqual([]);
  });

  it('tries shared memory only when every server is on loopback', () => {
    for (const address of ['127.0.0.1:50051', 'localhost:1', '[::1]:50051', 'dns:///localhost:50051', ['127.0.0.2:9'], ['127.0.0.1:1', '127.0.0.1:2'], 'ipv4:127.0.0.1:1,127.0.0.1:2']) {
      expect(isLoopbackAddress(address), String(address)).toBe(true);
    }
    for (const address of ['10.0.0.5:50051', 'inference:50051', ['127.0.0.1:1', '10.0.0.1:2'], 'dns:///inference.svc:50051', 'ipv4:127.0.0.1:1,10.1.1.1:2', '127.0.0.1']) {
      expect(isLoopbackAddress(address), String(address)).toBe(false);
    }
  });
});

describe('inference client through shared memory (real model)', () => {
  let server: InferenceProcess;
  beforeAll(async () => {
    server = await startInferenceProcess(['--model', 'isnet', '--workers', '1', '--allow-client-shm', 'true']);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('gives the same mask through shared memory as over the wire', async () => {
    const { rgb } = await objectOnTexture(1024, 1024, 'raw');
    const input = { name: 'image', datatype: 'UINT8' as const, shape: [1, 1024, 1024, 3], data: new Uint8Array(rgb) };
    const mask = { name: 'mask', datatype: 'UINT8' as const };
    const shm = client(server.address, 'auto', 64 << 20);
    const wire = client(server.address, 'off', 64 << 20);
    try {
      let throughShm: Uint8Array | undefined;
      for (let i = 0; i < 20 && !throughShm; i++) {
        const result = await shm.infer('isnet', input, mask, new AbortController().signal);
        if ((await shm.inferenceThreadCounts()).sharedMemory.calls > 0) throughShm = result.data as Uint8Array;
      }
      expect(throughShm, 'a call went through shared memory').toBeDefined();
      const overWire = await wire.infer('isnet', input, mask, new AbortController().signal);
      expect(overWire.shape).toEqual([1, 1, 1024, 1024]);
      expect(throughShm!.length).toBe(1024 * 1024);
      expect(Buffer.compare(Buffer.from(throughShm!), Buffer.from(overWire.data as Uint8Array))).toBe(0);
      // Not a blank answer: the object is found.
      expect(Math.max(...throughShm!.subarray(512 * 1024, 513 * 1024))).toBeGreaterThan(128);
    } finally {
      await Promise.all([shm.close(), wire.close()]);
    }
    expect(ownFiles()).toEqual([]);
  });
});
