import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { progressOf, type JobRecord } from '../job.js';
import { checkCallbackUrl, type CallbackPolicy } from './callback-policy.js';
import type { Delivery, DeliveryLog } from './deliveries.js';
import type { WebhookSecretStore } from './secrets.js';

export interface WebhookSenderOptions {
  secrets: WebhookSecretStore;
  deliveries: DeliveryLog;
  policy: CallbackPolicy;
  /** Waits before the 2nd, 3rd... attempt, in ms. Default 5 s, 30 s, 2 min, 10 min, 1 h (6 attempts). */
  retryDelaysMs?: number[];
  /** Longest one attempt may take, in ms. Default 10 000. */
  timeoutMs?: number;
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
 * the account's secret). One instance sends each event (DeliveryLog.claim on its `webhook-id`);
 * a receiver that does not answer 2xx is tried again after each of `retryDelaysMs`. The address
 * policy is applied before every attempt, and the connection goes to the address it checked.
 */
export class WebhookSender {
  private readonly inFlight = new Set<Promise<void>>();
  private readonly stopping = new AbortController();
  private readonly retryDelaysMs: number[];
  private readonly timeoutMs: number;
  private readonly now: () => number;

  constructor(private readonly options: WebhookSenderOptions) {
    this.retryDelaysMs = options.retryDelaysMs ?? DEFAULT_RETRY_DELAYS_MS;
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.now = options.now ?? Date.now;
  }

  /** Claims the event and starts its delivery (in the background: retries take long); resolves once claimed. */
  async send(type: string, job: JobRecord): Promise<void> {
    if (!job.callbackUrl) return;
    const secret = await this.options.secrets.get(job.accountId);
    const created = new Date(this.now());
    const delivery: Delivery = {
      id: `msg_${job.id}_${type}`,
      accountId: job.accountId,
      jobId: job.id,
      type,
      url: shownUrl(job.callbackUrl),
      state: 'pending',
      createdAt: created.toISOString(),
      attempts: [],
    };
    if (!(await this.options.deliveries.claim(delivery))) return;
    if (!secret) {
      delivery.state = 'failed';
      delivery.attempts.push({ at: created.toISOString(), status: 0, error: 'the account has no signing secret', ms: 0 });
      await this.options.deliveries.update(delivery);
      return;
    }
    const payload = JSON.stringify(eventPayload(type, job, created));
    const run = this.deliver(delivery, job.callbackUrl, secret, payload).catch(this.options.onInternalError);
    this.inFlight.add(run);
    void run.finally(() => this.inFlight.delete(run));
  }

  /** Stops retrying (deliveries still pending stay so in the log); waits for attempts under way. */
  async close(): Promise<void> {
    this.stopping.abort();
    await Promise.allSettled(this.inFlight);
  }

  /** Resolves when every delivery started so far has ended (for tests and shutdown). */
  async idle(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled(this.inFlight);
  }

  private async deliver(delivery: Delivery, callbackUrl: string, secret: string, payload: string): Promise<void> {
    const signer = new Webhook(secret);
    for (let attempt = 0; ; attempt++) {
      const started = this.now();
      const at = new Date(started);
      let status = 0;
      let error: string | undefined;
      try {
        const target = await checkCallbackUrl(callbackUrl, this.options.policy);
        const headers = {
          'content-type': 'application/json',
          'user-agent': 'bgcut-webhooks',
          'webhook-id': delivery.id,
          'webhook-timestamp': String(Math.floor(started / 1000)),
          'webhook-signature': signer.sign(delivery.id, at, payload),
        };
        status = await post(target, headers, payload, this.timeoutMs);
        if (status < 200 || status > 299) error = `answered ${status}`;
      } catch (failure) {
        error = failure instanceof Error ? (failure.name === 'ApiError' ? 'callback_url refused by the address policy' : failure.message) : String(failure);
      }
      delivery.attempts.push({ at: at.toISOString(), status, ...(error ? { error: error.slice(0, 200) } : {}), ms: Math.round(this.now() - started) });
      const last = attempt >= this.retryDelaysMs.length;
      delivery.state = !error ? 'delivered' : last ? 'failed' : 'pending';
      await this.options.deliveries.update(delivery).catch(this.options.onInternalError);
      if (!error || last) return;
      if (!(await wait(this.retryDelaysMs[attempt]!, this.stopping.signal))) return;
    }
  }
}

function shownUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.origin}${parsed.pathname}`;
  } catch {
    return '';
  }
}

function wait(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', stop);
      resolve(true);
    }, ms);
    const stop = () => {
      clearTimeout(timer);
      resolve(false);
    };
    signal.addEventListener('abort', stop, { once: true });
  });
}

/** One POST to the checked address (Host and SNI name the URL's host); resolves with the status. The body is not read beyond 4 KiB. */
function post(target: { url: URL; address: string; family: number }, headers: Record<string, string>, payload: string, timeoutMs: number): Promise<number> {
  const { url } = target;
  const secure = url.protocol === 'https:';
  const hostname = url.hostname.replace(/^\[|\]$/g, '');
  return new Promise((resolve, reject) => {
    const request = (secure ? https : http).request({
      host: target.address,
      family: target.family,
      port: url.port || (secure ? 443 : 80),
      path: `${url.pathname}${url.search}`,
      method: 'POST',
      headers: { ...headers, host: url.host, 'content-length': String(Buffer.byteLength(payload)) },
      agent: false,
      signal: AbortSignal.timeout(timeoutMs),
      ...(secure && !isIP(hostname) ? { servername: hostname } : {}),
    });
    request.once('response', (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    request.once('error', (error) => reject(error));
    request.end(payload);
  });
}
