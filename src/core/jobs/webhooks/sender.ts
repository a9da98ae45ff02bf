import { Webhook } from 'standardwebhooks';
import { pinnedRequest } from '../../image-url/pinned-request.js';
import { progressOf, type JobRecord } from '../job.js';
import { checkCallbackUrl, type CallbackPolicy } from './callback-policy.js';
import type { Delivery, DeliveryLog } from './deliveries.js';
import { InProcessDeliveryQueue, type DeliveryQueue, type ScheduledDelivery } from './delivery-queue.js';
import type { WebhookSecretStore } from './secrets.js';

export interface WebhookSenderOptions {
  secrets: WebhookSecretStore;
  deliveries: DeliveryLog;
  policy: CallbackPolicy;
  /** Waits before the 2nd, 3rd... attempt, in ms. Default 5 s, 30 s, 2 min, 10 min, 1 h (6 attempts). */
  retryDelaysMs?: number[];
  /** Longest one attempt may take, in ms. Default 10 000. */
  timeoutMs?: number;
  /** Where deliveries wait between attempts. Default: this process (`InProcessDeliveryQueue`). */
  queue?: DeliveryQueue;
  onInternalError: (error: unknown) => void;
  now?: () => number;
}

export const DEFAULT_RETRY_DELAYS_MS = [5_000, 30_000, 120_000, 600_000, 3_600_000];

/** The body every delivery of an event carries. */
export function eventPayload(type: string, job: JobRecord, at: Date) {
  return {
    type,
    timestamp: at.toISOString(),
    data: {
      id: job.id,
      state: job.state,
      progress: progressOf(job),
      createdAt: job.createdAt,
      finishedAt: job.finishedAt ?? null,
      expiresAt: job.expiresAt ?? null,
    },
  };
}

/**
 * Sends a job's events to its `callback_url`, signed per Standard Webhooks (`webhook-id`,
 * `webhook-timestamp`, `webhook-signature`: HMAC-SHA256 by the `standardwebhooks` package, with
 * the account's secret). The log's `claim` on the `webhook-id` records each event once; the
 * delivery queue makes the attempts, `retryDelaysMs` apart: in this process by default, through
 * BullMQ (Redis) when given one, so a retry outlives the instance that scheduled it. The address
 * policy is applied before every attempt, and the connection goes to the address it checked.
 */
export class WebhookSender {
  private readonly queue: DeliveryQueue;
  private readonly timeoutMs: number;
  private readonly now: () => number;

  constructor(private readonly options: WebhookSenderOptions) {
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.now = options.now ?? Date.now;
    this.queue = options.queue ?? new InProcessDeliveryQueue(options.onInternalError);
    this.queue.start((item, last) => this.attempt(item, last), options.retryDelaysMs ?? DEFAULT_RETRY_DELAYS_MS);
  }

  /**
   * Records the event and schedules its delivery (attempts run in the background: retries take
   * long); resolves once scheduled. Sending an event again is harmless: its id is claimed once,
   * and a durable queue drops a second schedule of the same id (a repeat of a send that an
   * instance died in the middle of, between claim and schedule, schedules it then).
   */
  async send(type: string, job: JobRecord): Promise<void> {
    if (!job.callbackUrl) return;
    const created = new Date(this.now());
    const delivery: Delivery = {
      id: webhookId(job.id, type),
      accountId: job.accountId,
      jobId: job.id,
      type,
      url: shownUrl(job.callbackUrl),
      state: 'pending',
      createdAt: created.toISOString(),
      attempts: [],
    };
    const claimed = await this.options.deliveries.claim(delivery);
    if (!claimed && !this.queue.durable) return;
    if (claimed && !(await this.options.secrets.get(job.accountId))) {
      delivery.state = 'failed';
      delivery.attempts.push({ at: created.toISOString(), status: 0, error: 'the account has no signing secret', ms: 0 });
      await this.options.deliveries.update(delivery);
      return;
    }
    await this.queue.schedule({ delivery, callbackUrl: job.callbackUrl, payload: JSON.stringify(eventPayload(type, job, created)) });
  }

  /** Stops making attempts here (deliveries still pending stay so in the log, and in a durable queue); waits for attempts under way. */
  async close(): Promise<void> {
    await this.queue.close();
  }

  /** Resolves when every delivery this process has started or is waiting on has ended (for tests and shutdown). */
  async idle(): Promise<void> {
    await this.queue.idle();
  }

  /** One signed POST; its outcome appended to the delivery and written to the log. */
  private async attempt(item: ScheduledDelivery, last: boolean): Promise<boolean> {
    const { delivery, callbackUrl, payload } = item;
    const started = this.now();
    const at = new Date(started);
    let status = 0;
    let error: string | undefined;
    try {
      const secret = await this.options.secrets.get(delivery.accountId);
      if (!secret) throw new Error('the account has no signing secret');
      const target = await checkCallbackUrl(callbackUrl, this.options.policy);
      const headers = {
        'content-type': 'application/json',
        'user-agent': 'bgcut-webhooks',
        'webhook-id': delivery.id,
        'webhook-timestamp': String(Math.floor(started / 1000)),
        'webhook-signature': new Webhook(secret).sign(delivery.id, at, payload),
      };
      const response = await pinnedRequest(target, { method: 'POST', headers: { ...headers, 'content-length': String(Buffer.byteLength(payload)) }, body: payload, signal: AbortSignal.timeout(this.timeoutMs) });
      response.resume();
      status = response.statusCode ?? 0;
      if (status < 200 || status > 299) error = `answered ${status}`;
    } catch (failure) {
      error = failure instanceof Error ? (failure.name === 'ApiError' ? 'callback_url refused by the address policy' : failure.message) : String(failure);
    }
    delivery.attempts.push({ at: at.toISOString(), status, ...(error ? { error: error.slice(0, 200) } : {}), ms: Math.round(this.now() - started) });
    delivery.state = !error ? 'delivered' : last ? 'failed' : 'pending';
    await this.options.deliveries.update(delivery).catch(this.options.onInternalError);
    return !error;
  }
}

/** The `webhook-id` of a job's event: the same for every attempt and every instance. */
export function webhookId(jobId: string, type: string): string {
  return `msg_${jobId}_${type}`;
}

function shownUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.origin}${parsed.pathname}`;
  } catch {
    return '';
  }
}
