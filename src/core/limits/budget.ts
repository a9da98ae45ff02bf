/**
 * A weighted, first-come-first-served semaphore: at most `capacity` units (requests, pixels)
 * held at once. A single request larger than the capacity waits until it is alone. A waiter whose
 * signal aborts leaves the queue at once. Hand-written (about 50 lines) because the common
 * semaphore packages count permits, not weights.
 */
export class Budget {
  private used = 0;
  private readonly waiting: { units: number; low: boolean; grant: () => void }[] = [];

  constructor(readonly capacity: number) {}

  /** Takes `units` now if they fit and nobody (of this priority or above) is waiting; returns the release, or undefined. */
  tryTake(units: number, low = false): (() => void) | undefined {
    const ahead = low ? this.waiting.length : this.waiting.filter((w) => !w.low).length;
    if (ahead > 0 || !this.fits(units)) return undefined;
    return this.grant(units);
  }

  /**
   * Waits for `units`, in arrival order; resolves with the release, or rejects with the signal's
   * reason. `low` (background work: jobs) queues behind every normal waiter, present or later.
   */
  take(units: number, signal?: AbortSignal, low = false): Promise<() => void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    const now = this.tryTake(units, low);
    if (now) return Promise.resolve(now);
    return new Promise((resolve, reject) => {
      const waiter = {
        units,
        low,
        grant: () => {
          signal?.removeEventListener('abort', leave);
          resolve(this.grant(units));
        },
      };
      const leave = () => {
        const index = this.waiting.indexOf(waiter);
        if (index >= 0) this.waiting.splice(index, 1);
        this.wakeWaiters();
        reject(signal!.reason);
      };
      signal?.addEventListener('abort', leave, { once: true });
      // A normal waiter goes ahead of every low-priority one.
      const firstLow = low ? -1 : this.waiting.findIndex((w) => w.low);
      if (firstLow < 0) this.waiting.push(waiter);
      else this.waiting.splice(firstLow, 0, waiter);
    });
  }

  /** This budget as background work sees it: every take queues behind normal waiters. */
  lowPriority(): Pick<Budget, 'take'> {
    return { take: (units, signal) => this.take(units, signal, true) };
  }

  get inUse(): number {
    return this.used;
  }

  /** Waiters still queued. */
  get queued(): number {
    return this.waiting.length;
  }

  private fits(units: number): boolean {
    return this.used === 0 || this.used + units <= this.capacity;
  }

  private wakeWaiters(): void {
    while (this.waiting.length > 0 && this.fits(this.waiting[0]!.units)) this.waiting.shift()!.grant();
  }

  private grant(units: number): () => void {
    this.used += units;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.used -= units;
      this.wakeWaiters();
    };
  }
}
