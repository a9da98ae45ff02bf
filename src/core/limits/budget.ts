/**
 * A weighted, first-come-first-served semaphore: at most `capacity` units (requests, pixels)
 * held at once. A single request larger than the capacity waits until it is alone. Hand-written
 * (about 40 lines) because the common semaphore packages count permits, not weights.
 */
export class Budget {
  private used = 0;
  private readonly waiting: { units: number; grant: () => void }[] = [];

  constructor(readonly capacity: number) {}

  /** Takes `units` now if they fit and nobody is waiting; returns the release, or undefined. */
  tryTake(units: number): (() => void) | undefined {
    if (this.waiting.length > 0 || !this.fits(units)) return undefined;
    return this.grant(units);
  }

  /** Waits for `units`, in arrival order; resolves with the release. */
  take(units: number): Promise<() => void> {
    const now = this.tryTake(units);
    if (now) return Promise.resolve(now);
    return new Promise((resolve) => {
      this.waiting.push({ units, grant: () => resolve(this.grant(units)) });
    });
  }

  get inUse(): number {
    return this.used;
  }

  /** Requests waiting for units. */
  get queued(): number {
    return this.waiting.length;
  }

  private fits(units: number): boolean {
    return this.used === 0 || this.used + units <= this.capacity;
  }

  private grant(units: number): () => void {
    this.used += units;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.used -= units;
      while (this.waiting.length > 0 && this.fits(this.waiting[0]!.units)) this.waiting.shift()!.grant();
    };
  }
}
