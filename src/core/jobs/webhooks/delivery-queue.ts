import { setTimeout as delay } from 'node:timers/promises';
import type { Delivery } from './deliveries.js';

/** One event's delivery as scheduled: its log record (with every attempt so far), where to, and the exact body. */
export interface ScheduledDelivery {
  delivery: Delivery;
  callbackUrl: string;
  /** The JSON body, fixed when the event happened: every attempt sends the same bytes under the same `webhook-id`. */
  payload: string;
}

/**
 * Makes one attempt (it appends to `item.delivery.attempts` and writes the log); resolves true
 * when the receiver answered 2xx. `last`: no attempt follows this one.
 */
export type DeliveryAttemptFn = (item: ScheduledDelivery, last: boolean) => Promise<boolean>;

/**
 * Where deliveries wait between attempts: InProcessDeliveryQueue (timers in this process: the
 * retries die with it) or BullMQDeliveryQueue (Redis: a retry scheduled by an instance that then
 * died is made by another). Either makes at most `retryDelaysMs.length + 1` attempts, waiting
 * `retryDelaysMs[k]` after the (k+1)th failed one.
 */
export interface DeliveryQueue {
  /** True when a delivery outlives this process (then a repeated `schedule` of an id is dropped by the queue itself). */
  readonly durable: boolean;
  schedule(item: ScheduledDelivery): Promise<void>;
  start(attempt: DeliveryAttemptFn, retryDelaysMs: number[]): void;
  /** Resolves when the deliveries this process is making or waiting on have ended (tests). */
  idle(): Promise<void>;
  /** Stops: no new attempt starts here; waits for attempts under way. */
  close(): Promise<void>;
}

/** Deliveries waiting in this process's timers: a retry is lost if the process ends (the log shows it pending). */
export class InProcessDeliveryQueue implements DeliveryQueue {
  readonly durable = false;
  private readonly inFlight = new Set<Promise<void>>();
  private readonly stopping = new AbortController();
  private attempt: DeliveryAttemptFn | undefined;
  private delays: number[] = [];

  constructor(private readonly onInternalError: (error: unknown) => void = () => {}) {}

  start(attempt: DeliveryAttemptFn, retryDelaysMs: number[]): void {
    this.attempt = attempt;
    this.delays = retryDelaysMs;
  }

  async schedule(item: ScheduledDelivery): Promise<void> {
    if (!this.attempt) throw new Error('the delivery queue is not started');
    const run = this.run(item, this.attempt).catch(this.onInternalError);
    this.inFlight.add(run);
    void run.finally(() => this.inFlight.delete(run));
  }

  async idle(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled(this.inFlight);
  }

  async close(): Promise<void> {
    this.stopping.abort();
    await Promise.allSettled(this.inFlight);
  }

  private async run(item: ScheduledDelivery, attempt: DeliveryAttemptFn): Promise<void> {
    for (let k = 0; ; k++) {
      if (this.stopping.signal.aborted) return;
      const last = k >= this.delays.length;
      if ((await attempt(item, last)) || last) return;
      if (!(await wait(this.delays[k]!, this.stopping.signal))) return;
    }
  }
}

/** Waits `ms`; false when `signal` aborts first (or already has). */
function wait(ms: number, signal: AbortSignal): Promise<boolean> {
  return delay(ms, true, { signal }).catch(() => false);
}
