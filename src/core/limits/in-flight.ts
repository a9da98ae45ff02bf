/**
 * Requests this instance works on at once. A place is reserved synchronously, before any wait,
 * so requests arriving together cannot all pass the check; once closed, no place is given and
 * `drained()` tells when the last one is back.
 */
export class InFlight {
  private count = 0;
  private closed = false;
  private readonly idleWaiters = new Set<() => void>();

  constructor(
    readonly max: number,
    private readonly onChange: (count: number) => void = () => {},
  ) {}

  get current(): number {
    return this.count;
  }

  get closing(): boolean {
    return this.closed;
  }

  /** A release for one place, or undefined when full or closing. */
  tryReserve(): (() => void) | undefined {
    if (this.closed || this.count >= this.max) return undefined;
    this.count++;
    this.onChange(this.count);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.count--;
      this.onChange(this.count);
      if (this.count === 0) for (const wake of this.idleWaiters) wake();
    };
  }

  /** Stops giving places; resolves true once none is held, false if `timeoutMs` passes first. */
  close(timeoutMs: number): Promise<boolean> {
    this.closed = true;
    if (this.count === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.idleWaiters.delete(wake);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.idleWaiters.delete(wake);
        resolve(false);
      }, timeoutMs);
      this.idleWaiters.add(wake);
    });
  }
}
