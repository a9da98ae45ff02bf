/**
 * The session worker's reads and writes of tensors in clients' shared memory regions
 * (shared-memory-regions.ts): one positional read into the tensor's own buffer, one positional
 * write from onnxruntime's output. The file is opened anew for each tensor, without following
 * links, and checked to be a regular file that still holds the region: a client may have
 * removed or shrunk it since it registered the region.
 */
import { closeSync, constants, fstatSync, openSync, readSync, writeSync } from 'node:fs';
import path from 'node:path';
import type { TensorPlace } from './worker-protocol.js';

/** A region unusable at the time of the call (its file gone, replaced or too short). */
export class RegionUnusableError extends Error {
  override readonly name = 'RegionUnusableError';
  constructor(
    message: string,
    /** FAILED_PRECONDITION: the file is not as registered; INVALID_ARGUMENT: the call asked for too little room. */
    readonly code: 'FAILED_PRECONDITION' | 'INVALID_ARGUMENT' = 'FAILED_PRECONDITION',
  ) {
    super(message);
  }
}

function open(place: TensorPlace, flags: number): number {
  let fd: number;
  try {
    fd = openSync(place.file, flags | constants.O_NOFOLLOW);
  } catch (error) {
    throw new RegionUnusableError(`shared memory object ${path.basename(place.file)} cannot be opened (${(error as NodeJS.ErrnoException).code})`);
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) throw new RegionUnusableError(`shared memory object ${path.basename(place.file)} is not a regular file`);
    if (stat.size < place.position + place.byteLength) {
      throw new RegionUnusableError(`shared memory object ${path.basename(place.file)} holds ${stat.size} bytes, the tensor needs ${place.position + place.byteLength}`);
    }
  } catch (error) {
    closeSync(fd);
    throw error;
  }
  return fd;
}

/** The tensor's bytes, read from its region into a fresh buffer. */
export function readTensor(place: TensorPlace): ArrayBuffer {
  const data = new ArrayBuffer(place.byteLength);
  const bytes = new Uint8Array(data);
  const fd = open(place, constants.O_RDONLY);
  try {
    let done = 0;
    while (done < bytes.length) {
      const read = readSync(fd, bytes, done, bytes.length - done, place.position + done);
      if (read === 0) throw new RegionUnusableError(`shared memory object ${path.basename(place.file)} ended before the tensor did`);
      done += read;
    }
  } finally {
    closeSync(fd);
  }
  return data;
}

/** Writes an output's bytes into its region (`place.byteLength`: the room there, at least `bytes`' length). */
export function writeTensor(place: TensorPlace, bytes: Uint8Array): void {
  if (bytes.byteLength > place.byteLength) {
    throw new RegionUnusableError(`the output takes ${bytes.byteLength} bytes, its region's shared_memory_byte_size gives ${place.byteLength}`, 'INVALID_ARGUMENT');
  }
  const fd = open({ ...place, byteLength: bytes.byteLength }, constants.O_WRONLY);
  try {
    let done = 0;
    while (done < bytes.length) done += writeSync(fd, bytes, done, bytes.length - done, place.position + done);
  } finally {
    closeSync(fd);
  }
}
