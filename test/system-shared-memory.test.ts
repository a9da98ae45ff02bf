/**
 * Triton's system shared memory extension on bgcut's server (shared-memory-regions.ts): the
 * three RPCs and their refusals, against a real server on loopback, and ModelInfer with its
 * input and output in /dev/shm files, compared with the same call over the wire.
 */
import * as grpc from '@grpc/grpc-js';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, truncateSync, unlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadInferenceProto, type GRPCInferenceServiceClient } from '../src/protocol/index.js';
import { isLocalPeer } from '../src/inference-server/shared-memory-regions.js';
// The pool runs worker threads from compiled files, so the server is started from the build.
import { startInferenceServer, type RunningInferenceServer } from '../dist/src/inference-server/server.js';
import { writeIdentityModel } from './helpers/identity-model.js';

const SIDE = 32;
const BYTES = SIDE * SIDE * 3;
const SHM = '/dev/shm';
const tag = `bgcut-test-${process.pid}-${randomBytes(4).toString('hex')}`;

function client(port: number): GRPCInferenceServiceClient {
  const Service = loadInferenceProto().inference.GRPCInferenceService;
  return new Service(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
}

type Unary<Req, Res> = (request: Req, options: grpc.CallOptions, callback: (error: grpc.ServiceError | null, response?: Res) => void) => unknown;

/** A unary call as a promise of its status code and answer. */
function call<Req, Res>(method: Unary<Req, Res>, self: GRPCInferenceServiceClient, request: Req): Promise<{ code: grpc.status; response?: Res; details?: string }> {
  return new Promise((resolve) => {
    method.call(self, request, { deadline: Date.now() + 30_000 }, (error, response) =>
      resolve(error ? { code: error.code, details: error.details } : { code: grpc.status.OK, response: response! }),
    );
  });
}

const register = (c: GRPCInferenceServiceClient, name: string, key: string, byteSize: number, offset = 0) =>
  call(c.SystemSharedMemoryRegister as never, c, { name, key, offset, byteSize });
const status = (c: GRPCInferenceServiceClient, name = '') => call(c.SystemSharedMemoryStatus as never, c, { name }) as Promise<{ code: grpc.status; response?: { regions: Record<string, { key: string; offset: number; byteSize: number }> } }>;
const unregister = (c: GRPCInferenceServiceClient, name = '') => call(c.SystemSharedMemoryUnregister as never, c, { name });

const shmParameters = (region: string, byteSize: number, offset = 0) => ({
  shared_memory_region: { stringParam: region },
  shared_memory_byte_size: { int64Param: byteSize },
  ...(offset ? { shared_memory_offset: { int64Param: offset } } : {}),
});

/** A shared memory object of `bytes` bytes; removed after each test. */
const made: string[] = [];
function shmObject(name: string, bytes: number | Buffer): string {
  const file = path.join(SHM, name);
  writeFileSync(file, typeof bytes === 'number' ? Buffer.alloc(bytes) : bytes);
  made.push(file);
  return `/${name}`;
}

describe('system shared memory (identity model, extension on)', () => {
  let dir: string;
  let server: RunningInferenceServer;
  let off: RunningInferenceServer;
  let c: GRPCInferenceServiceClient;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'bgcut-shm-test-'));
    const model = await writeIdentityModel(dir, SIDE);
    const common = { host: '127.0.0.1', port: 0, models: [{ name: 'identity', source: model }], workers: 1, intraOpThreads: 1, log: () => {} };
    [server, off] = await Promise.all([
      startInferenceServer({ ...common, sharedMemory: { allowClientShm: true, maxRegions: 3, maxRegionBytes: 1 << 20 } }),
      startInferenceServer(common),
    ]);
    c = client(server.port);
  });
  afterEach(async () => {
    await unregister(c);
    for (const file of made.splice(0)) rmSync(file, { force: true });
  });
  afterAll(async () => {
    c?.close();
    await Promise.all([server?.shutdown(), off?.shutdown()]);
    rmSync(dir, { recursive: true, force: true });
  });

  it('registers, reports and unregisters regions, and lists the extension in its metadata', async () => {
    const key = shmObject(`${tag}-a`, 4096);
    expect((await register(c, 'a', key, 1000, 96)).code).toBe(grpc.status.OK);
    expect((await register(c, 'b', key, 4096)).code).toBe(grpc.status.OK);
    const all = await status(c);
    expect(all.code).toBe(grpc.status.OK);
    expect(Object.keys(all.response!.regions).sort()).toEqual(['a', 'b']);
    expect(all.response!.regions.a).toMatchObject({ key, offset: 96, byteSize: 1000 });
    expect(Object.keys((await status(c, 'b')).response!.regions)).toEqual(['b']);
    expect((await unregister(c, 'a')).code).toBe(grpc.status.OK);
    expect((await status(c, 'a')).code).toBe(grpc.status.NOT_FOUND);
    // Unregistering a name that is not there succeeds, as unregistering twice would; '' unregisters all.
    expect((await unregister(c, 'a')).code).toBe(grpc.status.OK);
    expect((await unregister(c)).code).toBe(grpc.status.OK);
    expect(Object.keys((await status(c)).response!.regions)).toEqual([]);
    const meta = await call(c.ServerMetadata as never, c, {});
    expect((meta.response as { extensions: string[] }).extensions).toContain('system_shared_memory');
  });

  it('refuses every key that is not a POSIX shared memory name under /dev/shm, and links', async () => {
    const key = shmObject(`${tag}-k`, 64);
    symlinkSync(path.join(SHM, key.slice(1)), path.join(SHM, `${tag}-link`));
    made.push(path.join(SHM, `${tag}-link`));
    for (const bad of ['../etc/passwd', '/../etc/passwd', '/a/b', `${SHM}${key}`, '.hidden', '/.', '/..', '', 'x'.repeat(300), 'a\u0000b', `/${tag}-link`]) {
      const answer = await register(c, 'r', bad, 64);
      expect(answer.code, bad).toBe(grpc.status.INVALID_ARGUMENT);
    }
    expect((await status(c)).response!.regions).toEqual({});
  });

  it('refuses a missing object, one too small, a region too large, a name twice, and more regions than allowed', async () => {
    expect((await register(c, 'r', `/${tag}-missing`, 64)).code).toBe(grpc.status.NOT_FOUND);
    const key = shmObject(`${tag}-s`, 100);
    expect((await register(c, 'r', key, 101)).code).toBe(grpc.status.INVALID_ARGUMENT);
    expect((await register(c, 'r', key, 60, 41)).code).toBe(grpc.status.INVALID_ARGUMENT);
    expect((await register(c, 'r', key, 0)).code).toBe(grpc.status.INVALID_ARGUMENT);
    const big = shmObject(`${tag}-big`, (1 << 20) + 1);
    expect((await register(c, 'r', big, (1 << 20) + 1)).code).toBe(grpc.status.INVALID_ARGUMENT);
    expect((await register(c, 'bad/name', key, 10)).code).toBe(grpc.status.INVALID_ARGUMENT);
    expect((await register(c, 'r', key, 100)).code).toBe(grpc.status.OK);
    expect((await register(c, 'r', key, 100)).code).toBe(grpc.status.ALREADY_EXISTS);
    expect((await register(c, 'r2', key, 100)).code).toBe(grpc.status.OK);
    expect((await register(c, 'r3', key, 100)).code).toBe(grpc.status.OK);
    expect((await register(c, 'r4', key, 100)).code).toBe(grpc.status.RESOURCE_EXHAUSTED);
  });

  it('answers UNIMPLEMENTED on a server started without --allow-client-shm, and lists no extension', async () => {
    const other = client(off.port);
    try {
      const key = shmObject(`${tag}-off`, 64);
      expect((await register(other, 'r', key, 64)).code).toBe(grpc.status.UNIMPLEMENTED);
      expect((await status(other)).code).toBe(grpc.status.UNIMPLEMENTED);
      const input = { name: 'x', datatype: 'UINT8', shape: [1, SIDE, SIDE, 3], parameters: shmParameters('r', BYTES) };
      expect((await call(other.ModelInfer as never, other, { modelName: 'identity', inputs: [input] })).code).toBe(grpc.status.UNIMPLEMENTED);
      const meta = await call(other.ServerMetadata as never, other, {});
      expect((meta.response as { extensions: string[] }).extensions).toEqual([]);
    } finally {
      other.close();
    }
  });

  it('takes the input from a region and writes the output into one, the same bytes as over the wire', async () => {
    const image = randomBytes(BYTES);
    // One object: the input at 128 in a region that starts at 64, the output behind it.
    const key = shmObject(`${tag}-io`, Buffer.concat([Buffer.alloc(64 + 128), image, Buffer.alloc(BYTES + 16)]));
    expect((await register(c, 'io', key, 128 + 2 * BYTES + 16, 64)).code).toBe(grpc.status.OK);
    const infer = (request: object) => call(c.ModelInfer as never, c, { modelName: 'identity', ...request }) as Promise<{ code: grpc.status; details?: string; response?: { outputs: { name: string; shape: number[]; parameters: Record<string, { int64Param?: number }> }[]; rawOutputContents: Buffer[] } }>;
    const shm = await infer({
      inputs: [{ name: 'x', datatype: 'UINT8', shape: [1, SIDE, SIDE, 3], parameters: shmParameters('io', BYTES, 128) }],
      outputs: [{ name: 'y', parameters: shmParameters('io', BYTES + 16, 128 + BYTES) }],
    });
    expect(shm.code, shm.details).toBe(grpc.status.OK);
    // One raw entry per output, empty for one in a region (as Triton answers).
    expect(shm.response!.rawOutputContents.map((r) => r.length)).toEqual([0]);
    expect(shm.response!.outputs[0]!.shape.map(Number)).toEqual([1, SIDE, SIDE, 3]);
    expect(Number(shm.response!.outputs[0]!.parameters.shared_memory_byte_size!.int64Param)).toBe(BYTES);
    const written = readFileSync(path.join(SHM, key.slice(1))).subarray(64 + 128 + BYTES, 64 + 128 + 2 * BYTES);
    const wire = await infer({ inputs: [{ name: 'x', datatype: 'UINT8', shape: [1, SIDE, SIDE, 3] }], outputs: [{ name: 'y' }], rawInputContents: [image] });
    expect(wire.code).toBe(grpc.status.OK);
    expect(Buffer.compare(written, wire.response!.rawOutputContents[0]!)).toBe(0);
    expect(Buffer.compare(written, image)).toBe(0);
    // The input by region, the output in the message.
    const mixed = await infer({ inputs: [{ name: 'x', datatype: 'UINT8', shape: [1, SIDE, SIDE, 3], parameters: shmParameters('io', BYTES, 128) }], outputs: [{ name: 'y' }] });
    expect(Buffer.compare(mixed.response!.rawOutputContents[0]!, image)).toBe(0);
    // raw_input_contents with one (empty) entry per input, the one in a region included, is taken too.
    const perInput = await infer({ inputs: [{ name: 'x', datatype: 'UINT8', shape: [1, SIDE, SIDE, 3], parameters: shmParameters('io', BYTES, 128) }], outputs: [{ name: 'y' }], rawInputContents: [Buffer.alloc(0)] });
    expect(perInput.code, perInput.details).toBe(grpc.status.OK);
    expect(Buffer.compare(perInput.response!.rawOutputContents[0]!, image)).toBe(0);
    const both = await infer({ inputs: [{ name: 'x', datatype: 'UINT8', shape: [1, SIDE, SIDE, 3], parameters: shmParameters('io', BYTES, 128) }], outputs: [{ name: 'y' }], rawInputContents: [image] });
    expect(both.code).toBe(grpc.status.INVALID_ARGUMENT);
  });

  it('refuses tensors that do not fit their region, unknown regions, and objects removed or shrunk since', async () => {
    const key = shmObject(`${tag}-t`, 2 * BYTES);
    expect((await register(c, 't', key, 2 * BYTES)).code).toBe(grpc.status.OK);
    const infer = (input: object, output?: object) =>
      call(c.ModelInfer as never, c, { modelName: 'identity', inputs: [{ name: 'x', datatype: 'UINT8', shape: [1, SIDE, SIDE, 3], ...input }], ...(output ? { outputs: [{ name: 'y', ...output }] } : {}) });
    expect((await infer({ parameters: shmParameters('t', BYTES, BYTES + 1) })).code).toBe(grpc.status.INVALID_ARGUMENT); // past the end
    expect((await infer({ parameters: shmParameters('t', BYTES - 1) })).code).toBe(grpc.status.INVALID_ARGUMENT); // not the tensor's size
    expect((await infer({ parameters: shmParameters('nope', BYTES) })).code).toBe(grpc.status.INVALID_ARGUMENT); // not registered
    expect((await infer({ parameters: { shared_memory_region: { stringParam: 't' } } })).code).toBe(grpc.status.INVALID_ARGUMENT); // no size
    expect((await infer({ parameters: shmParameters('t', BYTES), contents: { uintContents: [1] } })).code).toBe(grpc.status.INVALID_ARGUMENT);
    expect((await infer({ parameters: shmParameters('t', BYTES) }, { parameters: shmParameters('t', BYTES - 1, BYTES) })).code).toBe(grpc.status.INVALID_ARGUMENT); // output room too small
    expect((await infer({ parameters: shmParameters('t', BYTES) }, { parameters: shmParameters('t', BYTES, BYTES) })).code).toBe(grpc.status.OK);
    truncateSync(path.join(SHM, key.slice(1)), BYTES);
    expect((await infer({ parameters: shmParameters('t', BYTES) }, { parameters: shmParameters('t', BYTES, BYTES) })).code).toBe(grpc.status.FAILED_PRECONDITION);
    unlinkSync(path.join(SHM, key.slice(1)));
    expect((await infer({ parameters: shmParameters('t', BYTES) })).code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(existsSync(path.join(SHM, key.slice(1)))).toBe(false);
  });
});

describe('isLocalPeer', () => {
  it('takes loopback and unix-socket peers only', () => {
    for (const peer of ['127.0.0.1:5000', '127.1.2.3:1', '[::1]:5000', '[::ffff:127.0.0.1]:80', 'unix:/tmp/s']) expect(isLocalPeer(peer), peer).toBe(true);
    for (const peer of ['10.0.0.1:5000', '[::2]:1', '128.0.0.1:1', '[::ffff:10.0.0.1]:80', '127.0.0.1.evil:1', 'localhost:1']) expect(isLocalPeer(peer), peer).toBe(false);
  });
});
