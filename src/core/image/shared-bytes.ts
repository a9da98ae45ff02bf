import { countKernel } from './kernel-calls.js';

/**
 * Model-size buffers that several pixel-pool tasks read (the model's view of the image, the mask
 * on the model's grid) are kept in shared memory: a SharedArrayBuffer crosses to a worker as it
 * is, where an ordinary buffer is copied on the host's main thread for every task it goes to
 * (pixel-pool.ts's Parcel). One copy here, made once (in a worker where the buffer is made
 * there), replaces one per hand-off.
 */
export function isShared(bytes: Uint8Array): boolean {
  return bytes.buffer instanceof SharedArrayBuffer;
}

/** A new buffer of `length` bytes in shared memory of its own (zeroed). */
export function sharedBuffer(length: number): Buffer {
  return Buffer.from(new SharedArrayBuffer(length));
}

/** `bytes` in shared memory of its own: as it is when already shared, else one copy (counted: kernel-calls.ts). */
export function sharedCopy(bytes: Buffer): Buffer {
  if (bytes.length === 0 || isShared(bytes)) return bytes;
  countKernel('sharedCopy');
  const copy = sharedBuffer(bytes.length);
  bytes.copy(copy);
  return copy;
}
