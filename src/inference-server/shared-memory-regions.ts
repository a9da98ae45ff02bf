/**
 * Triton's system shared memory extension on bgcut's server: the regions clients on this host
 * registered (SystemSharedMemoryRegister), and where a tensor named by `shared_memory_region`,
 * `shared_memory_byte_size` and `shared_memory_offset` lies in them.
 *
 * A region is a stretch of a POSIX shared memory object, which on Linux is a file under
 * /dev/shm: Node has no mmap, so the session worker reads an input from that file with one
 * positional read straight into the tensor's buffer, and writes an output the same way
 * (session-worker.ts): neither the gRPC message nor the server's main thread carries the bytes.
 *
 * Off unless the server is started with `allowClientShm` (`--allow-client-shm`), as Triton is
 * since it added its `--allow-client-shm` flag: a region lets its client have the server read and
 * write a file. With it on, the limits are:
 * - only callers on this host (a loopback peer) may register or use a region: elsewhere a region
 *   could not be shared anyway (PERMISSION_DENIED);
 * - a key is a POSIX shared memory name (`/name`, one component of [A-Za-z0-9_.-], no leading
 *   dot), resolved under /dev/shm alone: no path, no `..`, no symbolic link (INVALID_ARGUMENT);
 * - at most `maxRegions` regions, each at most `maxRegionBytes` (RESOURCE_EXHAUSTED, INVALID_ARGUMENT);
 * - the object must exist, be a regular file the server may read and write, and hold
 *   offset + byte_size bytes, at registration (NOT_FOUND, INVALID_ARGUMENT) and again at each use
 *   (FAILED_PRECONDITION: the session worker opens it without following links and checks its size);
 * - a tensor's offset + byte size must lie inside its region (INVALID_ARGUMENT);
 * - a name registered twice is ALREADY_EXISTS; status of an unknown name NOT_FOUND; unregistering
 *   an unknown name succeeds (as unregistering twice would), and an empty name unregisters all.
 */
import { constants, closeSync, fstatSync, openSync } from 'node:fs';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import type { TensorPlace } from './worker-protocol.js';

/** Where POSIX shared memory objects live on Linux (glibc's shm_open opens `/dev/shm/<name>`). */
export const SHM_DIRECTORY = '/dev/shm';

/** The parameters that put a tensor in a region (Triton's names). */
export const SHM_REGION_PARAMETER = 'shared_memory_region';
export const SHM_BYTE_SIZE_PARAMETER = 'shared_memory_byte_size';
export const SHM_OFFSET_PARAMETER = 'shared_memory_offset';

/** The extension's name in ServerMetadata's `extensions`, as Triton reports it. */
export const SHM_EXTENSION = 'system_shared_memory';

export interface SharedMemoryOptions {
  /** Clients on this host may register regions. Default false (Triton's `--allow-client-shm` default). */
  allowClientShm?: boolean;
  /** Most regions registered at once, all clients together. Default 256. */
  maxRegions?: number;
  /** Largest region, in bytes. Default 1 GiB. */
  maxRegionBytes?: number;
  /** Where keys resolve; tests only. Default /dev/shm. */
  directory?: string;
}

export interface SharedMemoryRegion {
  name: string;
  key: string;
  offset: number;
  byteSize: number;
  /** The file the key names. */
  file: string;
}


/** A refusal with its gRPC status. */
export class RegionError extends Error {
  constructor(
    readonly code: grpc.status,
    message: string,
  ) {
    super(message);
  }
}

/** An InferParameter as protobufjs decodes it (oneofs: true). */
export interface InferParameterValue {
  parameterChoice?: string;
  stringParam?: string;
  int64Param?: number | string;
  boolParam?: boolean;
}

const REGION_NAME = /^[A-Za-z0-9_.:-]{1,128}$/;
const SHM_KEY = /^\/?[A-Za-z0-9_-][A-Za-z0-9_.-]{0,254}$/;

/** Whether a call's peer (grpc-js's `call.getPeer()`) is on this host: 127.0.0.0/8, ::1, or a unix socket. */
export function isLocalPeer(peer: string): boolean {
  if (peer.startsWith('unix:')) return true;
  const host = peer.startsWith('[') ? peer.slice(1, peer.indexOf(']')) : peer.slice(0, peer.lastIndexOf(':'));
  const v4 = host.startsWith('::ffff:') ? host.slice(7) : host;
  return host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(v4);
}

/** A uint64 from the message as a safe integer, or a refusal. */
function byteCount(value: unknown, what: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 0) throw new RegionError(grpc.status.INVALID_ARGUMENT, `${what} must be a whole number of bytes, got ${String(value)}`);
  return n;
}

export class SharedMemoryRegions {
  readonly enabled: boolean;
  private readonly regions = new Map<string, SharedMemoryRegion>();
  private readonly maxRegions: number;
  private readonly maxRegionBytes: number;
  private readonly directory: string;

  constructor(options: SharedMemoryOptions = {}) {
    this.enabled = options.allowClientShm ?? false;
    this.maxRegions = options.maxRegions ?? 256;
    this.maxRegionBytes = options.maxRegionBytes ?? 2 ** 30;
    this.directory = options.directory ?? SHM_DIRECTORY;
    if (!Number.isInteger(this.maxRegions) || this.maxRegions < 1) throw new RangeError('maxRegions must be a positive integer');
    if (!Number.isSafeInteger(this.maxRegionBytes) || this.maxRegionBytes < 1) throw new RangeError('maxRegionBytes must be a positive integer');
  }

  /** Refuses a caller when the extension is off or the caller is not on this host. */
  checkCaller(peer: string): void {
    if (!this.enabled) throw new RegionError(grpc.status.UNIMPLEMENTED, 'system shared memory is off on this server (start it with --allow-client-shm true)');
    if (!isLocalPeer(peer)) throw new RegionError(grpc.status.PERMISSION_DENIED, 'system shared memory is for clients on the server\'s own host');
  }

  /** The file a POSIX shared memory key names, or a refusal for anything that is not such a name. */
  fileOf(key: string): string {
    if (!SHM_KEY.test(key)) {
      throw new RegionError(grpc.status.INVALID_ARGUMENT, `key must be a POSIX shared memory name ("/name": one component of letters, digits, "_", "-", ".", not starting with "."), got ${JSON.stringify(key.slice(0, 300))}`);
    }
    return path.join(this.directory, key.replace(/^\//, ''));
  }

  register(request: { name: string; key: string; offset: unknown; byteSize: unknown }): void {
    const { name, key } = request;
    if (!REGION_NAME.test(name)) throw new RegionError(grpc.status.INVALID_ARGUMENT, 'name must be 1-128 of [A-Za-z0-9_.:-]');
    const file = this.fileOf(key);
    const offset = byteCount(request.offset, 'offset');
    const byteSize = byteCount(request.byteSize, 'byte_size');
    if (byteSize < 1 || byteSize > this.maxRegionBytes) throw new RegionError(grpc.status.INVALID_ARGUMENT, `byte_size must be 1..${this.maxRegionBytes}, got ${byteSize}`);
    if (this.regions.has(name)) throw new RegionError(grpc.status.ALREADY_EXISTS, `a region named ${name} is registered already`);
    if (this.regions.size >= this.maxRegions) throw new RegionError(grpc.status.RESOURCE_EXHAUSTED, `${this.maxRegions} regions are registered: unregister one first`);
    checkFile(file, offset + byteSize, grpc.status.NOT_FOUND, grpc.status.INVALID_ARGUMENT);
    this.regions.set(name, { name, key, offset, byteSize, file });
  }

  unregister(name: string): void {
    if (name === '') this.regions.clear();
    else this.regions.delete(name);
  }

  status(name: string): SharedMemoryRegion[] {
    if (name === '') return [...this.regions.values()];
    const region = this.regions.get(name);
    if (!region) throw new RegionError(grpc.status.NOT_FOUND, `no region named ${name} is registered`);
    return [region];
  }

  get size(): number {
    return this.regions.size;
  }

  /**
   * Where a tensor named by these parameters lies, or undefined when it names no region. `needed`:
   * the bytes the tensor takes (an input's exactly; an output's at most, when known).
   */
  place(parameters: Record<string, InferParameterValue> | undefined, what: string, peer: string): TensorPlace | undefined {
    const region = parameters?.[SHM_REGION_PARAMETER];
    const size = parameters?.[SHM_BYTE_SIZE_PARAMETER];
    const offset = parameters?.[SHM_OFFSET_PARAMETER];
    if (!region && !size && !offset) return undefined;
    this.checkCaller(peer);
    if (!region || !size) throw new RegionError(grpc.status.INVALID_ARGUMENT, `${what}: ${SHM_REGION_PARAMETER} and ${SHM_BYTE_SIZE_PARAMETER} go together`);
    if (region.parameterChoice !== 'stringParam' || typeof region.stringParam !== 'string') throw new RegionError(grpc.status.INVALID_ARGUMENT, `${what}: ${SHM_REGION_PARAMETER} must be a string`);
    if (size.parameterChoice !== 'int64Param' || (offset && offset.parameterChoice !== 'int64Param')) {
      throw new RegionError(grpc.status.INVALID_ARGUMENT, `${what}: ${SHM_BYTE_SIZE_PARAMETER} and ${SHM_OFFSET_PARAMETER} must be int64`);
    }
    const registered = this.regions.get(region.stringParam);
    if (!registered) throw new RegionError(grpc.status.INVALID_ARGUMENT, `${what}: no region named ${region.stringParam} is registered`);
    const byteLength = byteCount(size.int64Param, `${what}: ${SHM_BYTE_SIZE_PARAMETER}`);
    const at = offset ? byteCount(offset.int64Param, `${what}: ${SHM_OFFSET_PARAMETER}`) : 0;
    if (at + byteLength > registered.byteSize) {
      throw new RegionError(grpc.status.INVALID_ARGUMENT, `${what}: offset ${at} + ${byteLength} bytes is past the end of region ${registered.name} (${registered.byteSize} bytes)`);
    }
    return { file: registered.file, position: registered.offset + at, byteLength };
  }
}

/**
 * Opens a region's file as the session worker does (not following a link: a key cannot lead out
 * of the shared memory folder) and checks that it is a regular file of at least `end` bytes.
 */
export function checkFile(file: string, end: number, missing: grpc.status, short: grpc.status): void {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDWR | constants.O_NOFOLLOW);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new RegionError(missing, `shared memory object ${path.basename(file)} does not exist`);
    throw new RegionError(short, `shared memory object ${path.basename(file)} cannot be opened for reading and writing (${code})`);
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) throw new RegionError(short, `shared memory object ${path.basename(file)} is not a regular file`);
    if (stat.size < end) throw new RegionError(short, `shared memory object ${path.basename(file)} holds ${stat.size} bytes, the region needs ${end}`);
  } finally {
    closeSync(fd);
  }
}
