/**
 * The API's side of Triton's system shared memory extension (the server's side:
 * src/inference-server/shared-memory-regions.ts), used by the inference thread when the server
 * is on this host: a bounded ring of slots, each a POSIX shared memory object (a file under
 * /dev/shm) registered with the server as one region. A call's input tensor is written into a
 * free slot (one positional write from the message the pixel worker built), the ModelInfer
 * message carries only the request's small fields and the slot's name, offsets and sizes, the
 * server's session worker reads the input and writes the mask into the same slot, and the thread
 * reads the mask from there into the shared memory the main thread gets. No tensor crosses
 * gRPC's framing, HTTP/2 flow control or either process's main thread.
 *
 * Nothing here ever makes a call fail: whenever the ring cannot serve a call (the extension
 * unknown yet, refused by the server, every slot busy, a slot being registered) the call goes
 * over the wire as before. Slots are made and registered in the background, so no call waits
 * for them. A slot whose call ended without an answer (cancelled, past its deadline, the
 * connection lost) is retired, never reused: the server may still read or write it, so it is
 * unregistered and removed, and a new slot, under a new name, takes its place when needed.
 *
 * Files are named `<prefix>-<n>` (prefix: `bgcut-api-<pid>-<random>`), created 0600 and removed
 * by close() (RemoveBgHandler.close()), and by the main thread on process exit (removeRingFiles).
 */
import { closeSync, constants, ftruncateSync, openSync, readdirSync, readSync, unlinkSync, writeSync } from 'node:fs';
import path from 'node:path';
import type * as grpc from '@grpc/grpc-js';
import type { GRPCInferenceServiceClient } from '../../protocol/index.js';

export const SHM_DIRECTORY = '/dev/shm';

export interface SharedMemorySettings {
  /** `auto`: used when the server accepts it (it must be on this host); `off`: never. */
  mode: 'auto' | 'off';
  /** Most slots (calls in flight through shared memory) of this process. */
  slots: number;
  /** Name prefix of this process's objects. */
  prefix: string;
  /** Largest slot, in bytes (input and output together). */
  maxSlotBytes: number;
}

/** How the ring stands: for tests and the thread's counts. */
export interface RingCounts {
  state: RingState;
  /** Calls whose tensors went through a slot. */
  calls: number;
  /** Calls that went over the wire while shared memory was on (no free slot, or a slot being registered). */
  wire: number;
  /** Calls retried over the wire after the server refused their regions. */
  refused: number;
  slots: number;
}

type RingState = 'off' | 'unknown' | 'probing' | 'on' | 'refused';

/** After a refusal (the server does not offer the extension, or lost its regions), the next probe waits this long. */
const REPROBE_AFTER_MS = 30_000;
/** Slots grow in steps of this many bytes, so a mode of a slightly different size reuses them. */
const SLOT_STEP = 1024 * 1024;
/** Deadline of the control calls (status, register, unregister). */
const CONTROL_DEADLINE_MS = 2_000;
/** Offsets of the output inside a slot are aligned to this. */
const ALIGN = 64;

export interface Slot {
  name: string;
  file: string;
  fd: number;
  bytes: number;
  busy: boolean;
  /** Registered with the server (usable). */
  registered: boolean;
}

/** Places of one call in its slot. */
export interface SlotUse {
  slot: Slot;
  inputBytes: number;
  outputOffset: number;
  outputRoom: number;
}

export class SharedMemoryRing {
  private state: RingState;
  private readonly slots: Slot[] = [];
  private generation = 0;
  private retryAt = 0;
  private preparing = false;
  private closed = false;
  readonly counts = { calls: 0, wire: 0, refused: 0 };

  /**
   * `servers`: a client of each server the calls may reach (the balanced channel's own client when
   * there is one server; one client per address when there are several): every slot is
   * registered with each of them, so a call may go to any.
   */
  constructor(
    private readonly servers: GRPCInferenceServiceClient[],
    private readonly settings: SharedMemorySettings,
    private readonly directory = SHM_DIRECTORY,
  ) {
    this.state = settings.mode === 'auto' && settings.slots > 0 ? 'unknown' : 'off';
  }

  snapshot(): RingCounts {
    return { state: this.state, ...this.counts, slots: this.slots.length };
  }

  /**
   * A free registered slot with room for `inputBytes` and `outputRoom`, taken for one call; or
   * undefined, and the call goes over the wire (while the ring probes the server or prepares a
   * slot in the background).
   */
  take(inputBytes: number, outputRoom: number): SlotUse | undefined {
    if (this.state === 'off' || this.closed) return undefined;
    const outputOffset = Math.ceil(inputBytes / ALIGN) * ALIGN;
    const needed = outputOffset + outputRoom;
    if (needed > this.settings.maxSlotBytes) return undefined;
    if (this.state === 'on') {
      const slot = this.slots.find((s) => !s.busy && s.registered && s.bytes >= needed);
      if (slot) {
        slot.busy = true;
        return { slot, inputBytes, outputOffset, outputRoom };
      }
      this.counts.wire++;
    }
    this.prepare(needed);
    return undefined;
  }

  /** The slot's call got an answer (or a refusal before it ran): the slot may serve the next call. */
  release(use: SlotUse): void {
    use.slot.busy = false;
  }

  /** The slot's call ended without an answer: the server may still use it, so it is never used again. */
  retire(use: SlotUse): void {
    this.drop(use.slot);
  }

  /**
   * The server refused a call's regions (it restarted and forgot them, or the object changed):
   * the call goes over the wire, every slot is dropped, and the ring probes again later.
   */
  refused(use: SlotUse): void {
    this.counts.refused++;
    this.drop(use.slot);
    for (const slot of [...this.slots]) if (!slot.busy) this.drop(slot);
    this.state = 'refused';
    this.retryAt = Date.now() + REPROBE_AFTER_MS;
  }

  writeInput(use: SlotUse, tensor: Uint8Array): void {
    let done = 0;
    while (done < tensor.byteLength) done += writeSync(use.slot.fd, tensor, done, tensor.byteLength - done, done);
  }

  readOutput(use: SlotUse, target: Uint8Array): void {
    let done = 0;
    while (done < target.byteLength) {
      const read = readSync(use.slot.fd, target, done, target.byteLength - done, use.outputOffset + done);
      if (read === 0) throw new Error('the shared memory slot ended before the output did');
      done += read;
    }
  }

  /** Unregisters every slot (briefly: the server may be gone) and removes their files. */
  async close(): Promise<void> {
    this.closed = true;
    const slots = this.slots.splice(0);
    await Promise.all(slots.filter((s) => s.registered).map((s) => this.control('SystemSharedMemoryUnregister', { name: s.name }).catch(() => {})));
    for (const slot of slots) removeSlotFile(slot);
  }

  /** Probes the server, or makes (or grows) a slot, in the background; one thing at a time. */
  private prepare(needed: number): void {
    if (this.preparing || this.closed) return;
    if ((this.state === 'refused' || this.state === 'unknown') && Date.now() < this.retryAt) return;
    this.preparing = true;
    void this.prepareNow(needed)
      .catch(() => {
        this.state = 'refused';
        this.retryAt = Date.now() + REPROBE_AFTER_MS;
      })
      .finally(() => {
        this.preparing = false;
      });
  }

  private async prepareNow(needed: number): Promise<void> {
    if (this.state !== 'on') {
      this.state = 'probing';
      await this.control('SystemSharedMemoryStatus', { name: '' });
      if (this.closed) return;
      this.state = 'on';
    }
    // A free slot too small for this size is replaced by a larger one; else a new one, within the bound.
    const small = this.slots.find((s) => !s.busy && s.bytes < needed);
    if (small) this.drop(small);
    if (this.slots.length >= this.settings.slots) return;
    const bytes = Math.min(this.settings.maxSlotBytes, Math.ceil(needed / SLOT_STEP) * SLOT_STEP);
    const name = `${this.settings.prefix}-${this.generation++}`;
    const file = path.join(this.directory, name);
    const fd = openSync(file, constants.O_RDWR | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    const slot: Slot = { name, file, fd, bytes, busy: false, registered: false };
    this.slots.push(slot);
    try {
      // Sparse until written: an output's room that a smaller mask never fills takes no memory.
      ftruncateSync(fd, bytes);
      await this.control('SystemSharedMemoryRegister', { name, key: `/${name}`, offset: 0, byteSize: bytes });
    } catch (error) {
      this.drop(slot);
      throw error;
    }
    if (this.closed || !this.slots.includes(slot)) return;
    slot.registered = true;
  }

  private drop(slot: Slot): void {
    const index = this.slots.indexOf(slot);
    if (index >= 0) this.slots.splice(index, 1);
    if (slot.registered && !this.closed) void this.control('SystemSharedMemoryUnregister', { name: slot.name }).catch(() => {});
    slot.registered = false;
    removeSlotFile(slot);
  }

  /** The control call on every server; fails when any of them refuses. */
  private async control(method: 'SystemSharedMemoryStatus' | 'SystemSharedMemoryRegister' | 'SystemSharedMemoryUnregister', request: object): Promise<void> {
    const once = (client: GRPCInferenceServiceClient) =>
      new Promise<void>((resolve, reject) => {
        const invoke = client[method] as unknown as (request: object, options: grpc.CallOptions, callback: (error: grpc.ServiceError | null) => void) => void;
        invoke.call(client, request, { deadline: Date.now() + CONTROL_DEADLINE_MS }, (error) => (error ? reject(error) : resolve()));
      });
    const results = await Promise.allSettled(this.servers.map(once));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  }
}

function removeSlotFile(slot: Slot): void {
  if (slot.fd >= 0) {
    try {
      closeSync(slot.fd);
    } catch {
      // closed already
    }
    slot.fd = -1;
  }
  try {
    unlinkSync(slot.file);
  } catch {
    // removed already
  }
}

/** Removes what is left of a ring's files (the main thread, on exit or after its thread ended). */
export function removeRingFiles(prefix: string, directory = SHM_DIRECTORY): number {
  let removed = 0;
  let names: string[];
  try {
    names = readdirSync(directory);
  } catch {
    return 0;
  }
  for (const name of names) {
    if (!name.startsWith(`${prefix}-`)) continue;
    try {
      unlinkSync(path.join(directory, name));
      removed++;
    } catch {
      // gone already
    }
  }
  return removed;
}

/**
 * The servers an inference address names when every one of them is on this host (loopback), the
 * only case where `auto` tries shared memory; undefined otherwise. Several (a list of `ip:port`,
 * or an `ipv4:a,b` target) are given one by one, so each slot can be registered with each server.
 */
export function loopbackServers(address: string | string[]): string[] | undefined {
  const list = (Array.isArray(address) ? address : [address]).flatMap((a) => (/^(ipv4|ipv6):/.test(a) ? a.slice(5).split(',') : [a]));
  if (list.length === 0) return undefined;
  const loopback = (entry: string) => {
    const target = entry.replace(/^dns:(\/\/\/)?/, '');
    const colon = target.lastIndexOf(':');
    if (colon < 0 || !/^\d+$/.test(target.slice(colon + 1))) return false;
    const host = target.startsWith('[') ? target.slice(1, target.indexOf(']')) : target.slice(0, colon);
    return host === 'localhost' || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
  };
  return list.every(loopback) ? list : undefined;
}

/** Whether shared memory may be tried with these servers (all on this host). */
export const isLoopbackAddress = (address: string | string[]): boolean => loopbackServers(address) !== undefined;
