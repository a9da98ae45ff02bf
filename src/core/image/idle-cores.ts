import os from 'node:os';

/**
 * How many of the host's cores were idle over the last quarter second, from the kernel's CPU
 * times (os.cpus(): /proc/stat on Linux), sampled on an unref'd timer.
 *
 * Why: the pixel pool splits a lone render across its idle workers (render-bands.ts), but idle
 * workers are not idle cores. Several API processes on one host (examples/cluster, `npm start`
 * with BGCUT_API_PROCESSES) each have their own workers, most of them waiting while the host's
 * cores are all busy with the other processes' work; a render split then only adds hand-offs.
 * So a render takes one more band per idle core, and none when the host is busy. A sample costs
 * about 0.1 ms (2 cores) to 0.5 ms (many) of this thread every 250 ms.
 */
export const IDLE_SAMPLE_MS = 250;

export class IdleCores {
  private last = totals();
  private idle = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(intervalMs = IDLE_SAMPLE_MS) {
    this.timer = setInterval(() => this.sample(), intervalMs);
    this.timer.unref();
  }

  /** Idle cores (a fraction of the cores, times their number) over the last interval; 0 until the first. */
  get now(): number {
    return this.idle;
  }

  private sample(): void {
    const next = totals();
    const busy = next.busy - this.last.busy;
    const idle = next.idle - this.last.idle;
    this.last = next;
    this.idle = busy + idle > 0 ? (next.cores * idle) / (busy + idle) : 0;
  }

  close(): void {
    clearInterval(this.timer);
  }
}

/** The CPU times of all cores, summed: idle, and everything else. */
function totals(): { idle: number; busy: number; cores: number } {
  let idle = 0;
  let busy = 0;
  const cpus = os.cpus();
  for (const { times } of cpus) {
    idle += times.idle;
    busy += times.user + times.nice + times.sys + times.irq;
  }
  return { idle, busy, cores: cpus.length };
}
