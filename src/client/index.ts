/**
 * `bgcut/client`: a typed, fetch-based client of the bgcut API for Node 20+ (and browsers behind
 * your own backend proxy: never put an API key in frontend code).
 *
 *   const bgcut = new BgcutClient({ baseUrl: 'https://api.example.com' }); // key from BGCUT_API_KEY
 *   const { image, foreground } = await bgcut.removeBackground('photo.jpg', { format: 'webp' });
 */
import { apiErrorOf, BgcutConnectionError, BgcutTimeoutError, type BgcutApiError, type Problem, type RateLimitStanding } from './errors.js';
import { prepareInput, type ImageInput } from './input.js';
import { JobsClient } from './jobs.js';
import { parseRetryAfter, resolveRetry, retryDelayMs, sleep, type ResolvedRetry, type RetryOptions } from './retry.js';

export * from './errors.js';
export type { ImageInput } from './input.js';
export type { RetryOptions } from './retry.js';
export type { JobStatus, CreateJobOptions } from './jobs.js';

export interface BgcutClientOptions {
  /** Default: the BGCUT_API_KEY environment variable. */
  apiKey?: string;
  /** Where the API is mounted, e.g. `https://api.example.com` or `http://localhost:3000/api`. Default: BGCUT_API_URL, else `http://localhost:3000`. */
  baseUrl?: string;
  /** Longest one attempt may take, in ms (upload, processing and download). Default 120 000. */
  timeoutMs?: number;
  retry?: RetryOptions;
  /** Largest stream input read into memory, in bytes. Default 64 MiB. */
  maxInputBytes?: number;
  /** Called before each retry, e.g. to log it. */
  onRetry?: (event: RetryEvent) => void;
  /** Another fetch (a proxy agent's, a test double). Default: the global fetch. */
  fetch?: typeof fetch;
  /** Source of jitter, 0 <= x < 1. Default Math.random. */
  random?: () => number;
}

export interface RetryEvent {
  /** The retry about to be made, 1-based. */
  retry: number;
  delayMs: number;
  /** The status that is retried, or undefined for a failed connection. */
  status: number | undefined;
  code: string | undefined;
}

export interface RemoveBackgroundOptions {
  /** `zip`: a ZIP of `color.jpg` and `alpha.png`, to be joined by the caller (docs/api.md). */
  format?: 'png' | 'webp' | 'jpg' | 'avif' | 'zip';
  channels?: 'rgba' | 'alpha';
  /** `#rgb`, `#rrggbb`, `#rrggbbaa`, a CSS colour name, or `transparent`. */
  bgColor?: string;
  crop?: boolean;
  /** One, two or four margins in CSS order, px or % (`10px`, `10px 5%`); needs `crop`. */
  cropMargin?: string;
  /** `10%`-`100%`: the subject resized to fit that share of the canvas; `original` (default) leaves it. */
  scale?: string;
  /** `original`, `center`, `x%` or `x% y%`: where the subject goes on the canvas. */
  position?: string;
  /** A soft drop shadow made from the mask. */
  addShadow?: boolean;
  /** With `addShadow`: 0-100 (%), default 50. */
  shadowOpacity?: number;
  size?: 'preview' | 'medium' | 'hd' | 'full' | 'auto';
  /** Region of interest `x1 y1 x2 y2`, each px or % (`10% 0% 90% 100%`): only it may be foreground. */
  roi?: string;
  /**
   * Keep/remove strokes (docs/api.md#hints-keep-and-remove-strokes): an image over the input as
   * displayed, at its size or scaled; white keep, black remove, transparent no hint. A file path,
   * bytes or a Blob.
   */
  hints?: string | Uint8Array | ArrayBuffer | Blob;
  /**
   * A photo to put behind the cutout, cover-fitted to the output: a path, bytes, a Blob or a
   * stream (sent as the part `bg_image`), or `{ url }` (sent as `bg_image_url`, fetched by the API).
   * Not with `bgColor`, `channels: 'alpha'` or `format: 'zip'`.
   */
  bgImage?: ImageInput;
  /** `WxH`: the exact output canvas; the subject is fitted into it inside `padding` (docs/api.md). */
  outputSize?: string;
  /** With `outputSize`: one, two or four values in CSS order, px or % of the canvas side (`10%`, `40px 20px`). */
  padding?: string;
  model?: string;
  /** The file name sent with the upload (the result's name is derived from it). */
  filename?: string;
  signal?: AbortSignal;
  /** Overrides the client's timeoutMs for this call. */
  timeoutMs?: number;
  /**
   * The request's Idempotency-Key, sent with every attempt of this call so the API charges it
   * once however often it is retried. Default: a new random UUID per call. Pass your own (1-255
   * visible ASCII characters) to make a call that your program repeats, after a crash say, count once.
   */
  idempotencyKey?: string;
}

export interface Box {
  top: number;
  left: number;
  width: number;
  height: number;
}

export interface Cutout {
  /** The encoded image. */
  image: Uint8Array;
  contentType: string;
  /** Suggested file name, e.g. `photo-nobg.png`. */
  filename: string;
  width: number;
  height: number;
  /** The foreground's box in the returned image; null when the image has no foreground. */
  foreground: Box | null;
  /**
   * How sure the model was of this cutout, 0..1 (X-Confidence); undefined from a server that does
   * not send it. A ranking: send the lowest to a person or retry them with `quality: 'best'`.
   */
  confidence: number | undefined;
  rateLimit: RateLimitStanding | undefined;
  /** Milliseconds per server stage, from Server-Timing. */
  timings: Record<string, number>;
  /** Attempts made, retries included. */
  attempts: number;
}

export interface AccountStanding {
  account: { id: string; status: 'active' | 'suspended' };
  keyId: string;
  plan: Record<string, unknown> & { name: string; requestsPerMinute: number; maxUploadBytes: number };
  usage: { month: string; images: number; megapixels: number };
  quota: { unit: string; amount: number; used: number; remaining: number; resetsAt: string } | null;
  rate: RateLimitStanding;
  inProgress: number;
}

const OPTION_FIELDS = { format: 'format', channels: 'channels', bgColor: 'bg_color', crop: 'crop', cropMargin: 'crop_margin', scale: 'scale', position: 'position', addShadow: 'add_shadow', shadowOpacity: 'shadow_opacity', size: 'size', roi: 'roi', outputSize: 'output_size', padding: 'padding', model: 'model' } as const;

export class BgcutClient {
  private readonly apiKey: string;
  private readonly baseUrl: string;
  private readonly timeoutMs: number;
  private readonly retry: ResolvedRetry;
  private readonly maxInputBytes: number;
  private readonly fetch: typeof fetch;
  private readonly random: () => number;
  /** Asynchronous batch jobs: `create`, `get`, `wait`, `result`, `results` (ZIP), `cancel`. */
  readonly jobs: JobsClient;

  constructor(private readonly options: BgcutClientOptions = {}) {
    const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env ?? {};
    const apiKey = options.apiKey ?? env.BGCUT_API_KEY;
    if (!apiKey) throw new TypeError('no API key: pass apiKey or set BGCUT_API_KEY');
    this.apiKey = apiKey;
    this.baseUrl = (options.baseUrl ?? env.BGCUT_API_URL ?? 'http://localhost:3000').replace(/\/+$/, '');
    this.timeoutMs = options.timeoutMs ?? 120_000;
    this.retry = resolveRetry(options.retry);
    this.maxInputBytes = options.maxInputBytes ?? 64 * 1024 * 1024;
    this.fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.random = options.random ?? Math.random;
    this.jobs = new JobsClient((path, request, sendOptions) => this.send(path, request, sendOptions), this.maxInputBytes);
  }

  /** The image with its background removed, with its size, foreground box and rate-limit standing. */
  async removeBackground(input: ImageInput, options: RemoveBackgroundOptions = {}): Promise<Cutout> {
    const prepared = await prepareInput(input, options.filename, this.maxInputBytes);
    const hints = options.hints === undefined ? undefined : await prepareInput(options.hints, 'hints.png', this.maxInputBytes);
    const fields: [string, string][] = [];
    for (const [option, field] of Object.entries(OPTION_FIELDS)) {
      const value = options[option as keyof typeof OPTION_FIELDS];
      if (value !== undefined) fields.push([field, String(value)]);
    }
    const background = options.bgImage === undefined ? undefined : await prepareInput(options.bgImage, undefined, this.maxInputBytes);
    const body = () => {
      const form = new FormData();
      if (prepared.kind === 'file') form.append('file', prepared.blob, prepared.filename);
      else form.append('image_url', prepared.url);
      if (background?.kind === 'file') form.append('bg_image', background.blob, background.filename);
      else if (background) form.append('bg_image_url', background.url);
      for (const [name, value] of fields) form.append(name, value);
      if (hints?.kind === 'file') form.append('hints', hints.blob, hints.filename);
      return form;
    };
    // One key per logical request, the same on every retry: a retry after a lost answer is answered
    // from the first attempt's result instead of being charged again.
    const idempotencyKey = options.idempotencyKey ?? globalThis.crypto.randomUUID();
    const { response, attempts } = await this.send('/v1/remove-bg', { method: 'POST', body, headers: { 'idempotency-key': idempotencyKey } }, options);
    const contentType = response.headers.get('content-type') ?? 'application/octet-stream';
    const image = new Uint8Array(await response.arrayBuffer());
    const header = (name: string) => Number(response.headers.get(name) ?? 0);
    const box = { top: header('x-foreground-top'), left: header('x-foreground-left'), width: header('x-foreground-width'), height: header('x-foreground-height') };
    return {
      image,
      contentType,
      filename: filenameOf(response.headers.get('content-disposition')) ?? 'image-nobg',
      width: header('x-width'),
      height: header('x-height'),
      foreground: box.width > 0 && box.height > 0 ? box : null,
      confidence: response.headers.has('x-confidence') ? Number(response.headers.get('x-confidence')) : undefined,
      rateLimit: rateLimitOf(response.headers),
      timings: timingsOf(response.headers.get('server-timing')),
      attempts,
    };
  }

  /** `GET /v1/account`: the plan, its limits, this month's usage and what remains. */
  async account(options: { signal?: AbortSignal; timeoutMs?: number } = {}): Promise<AccountStanding> {
    const { response } = await this.send('/v1/account', { method: 'GET' }, options);
    return (await response.json()) as AccountStanding;
  }

  /** One call with its retries: returns a 2xx response, or throws a typed error. */
  private async send(
    path: string,
    request: { method: string; body?: () => FormData | string; headers?: Record<string, string> },
    options: { signal?: AbortSignal | undefined; timeoutMs?: number | undefined },
  ): Promise<{ response: Response; attempts: number }> {
    const started = Date.now();
    for (let attempt = 1; ; attempt++) {
      const timeoutMs = options.timeoutMs ?? this.timeoutMs;
      const timeout = AbortSignal.timeout(timeoutMs);
      const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
      let response: Response | undefined;
      let failure: BgcutApiError | BgcutConnectionError;
      try {
        response = await this.fetch(`${this.baseUrl}${path}`, {
          method: request.method,
          headers: { accept: 'image/*, application/problem+json', ...request.headers, 'x-api-key': this.apiKey },
          ...(request.body ? { body: request.body() } : {}),
          signal,
        });
        if (response.ok) return { response, attempts: attempt };
        failure = await errorOf(response, attempt);
      } catch (error) {
        if (options.signal?.aborted) throw options.signal.reason;
        if (timeout.aborted) throw new BgcutTimeoutError(`${request.method} ${path} took longer than ${timeoutMs} ms`, { cause: error });
        if (error instanceof BgcutConnectionError) throw error;
        failure = new BgcutConnectionError(`cannot reach ${this.baseUrl}: ${(error as Error).message}`, { cause: error });
      }
      const status = response?.status;
      // 409 idempotency_key_in_use: the first attempt is still running; its answer comes to a retry.
      const inProgress = status === 409 && 'code' in failure && failure.code === 'idempotency_key_in_use';
      const retryable = status === 429 || status === 503 || inProgress || (status === undefined && this.retry.onConnectionError);
      if (!retryable || attempt > this.retry.maxRetries) throw failure;
      const retryAfter = 'retryAfterSeconds' in failure ? failure.retryAfterSeconds : undefined;
      const delayMs = retryDelayMs(attempt, retryAfter, this.retry, this.random);
      // A wait that would end past the budget is not worth starting: fail now, with the reason.
      if (Date.now() - started + delayMs > this.retry.maxElapsedMs) throw failure;
      this.options.onRetry?.({ retry: attempt, delayMs, status, code: 'code' in failure ? failure.code : undefined });
      await sleep(delayMs, options.signal);
    }
  }
}

/** `removeBackground(input, options)` with a client made from the environment (BGCUT_API_KEY, BGCUT_API_URL). */
export function removeBackground(input: ImageInput, options?: RemoveBackgroundOptions & { client?: BgcutClientOptions }): Promise<Cutout> {
  return new BgcutClient(options?.client).removeBackground(input, options);
}

async function errorOf(response: Response, attempts: number): Promise<BgcutApiError | BgcutConnectionError> {
  const text = await response.text().catch(() => '');
  let problem: Problem | undefined;
  try {
    const parsed = JSON.parse(text) as Problem;
    if (typeof parsed?.code === 'string') problem = parsed;
  } catch {
    // not problem+json: a proxy's page, say
  }
  if (!problem) return new BgcutConnectionError(`unexpected ${response.status} answer that is not a bgcut problem: ${text.slice(0, 200)}`);
  return apiErrorOf(
    { ...problem, status: response.status },
    { retryAfterSeconds: parseRetryAfter(response.headers.get('retry-after')), rateLimit: rateLimitOf(response.headers), attempts },
  );
}

function rateLimitOf(headers: Headers): RateLimitStanding | undefined {
  const limit = headers.get('x-ratelimit-limit');
  if (limit === null) return undefined;
  return { limit: Number(limit), remaining: Number(headers.get('x-ratelimit-remaining')), resetSeconds: Number(headers.get('x-ratelimit-reset')) };
}

function timingsOf(header: string | null): Record<string, number> {
  const timings: Record<string, number> = {};
  for (const entry of (header ?? '').split(',')) {
    const match = /^\s*([\w-]+)\s*;\s*dur=([\d.]+)/.exec(entry);
    if (match) timings[match[1]!] = Number(match[2]);
  }
  return timings;
}

function filenameOf(disposition: string | null): string | undefined {
  const extended = /filename\*=UTF-8''([^;]+)/i.exec(disposition ?? '');
  if (extended) {
    try {
      return decodeURIComponent(extended[1]!);
    } catch {
      // fall through to the plain name
    }
  }
  // A plain token (`filename=a.png`) or a quoted string (`filename="a b.png"`, with \" escapes).
  const plain = /(?:^|;)\s*filename=(?:"((?:[^"\\]|\\.)*)"|([^;\s]+))/i.exec(disposition ?? '');
  return plain ? (plain[1]?.replace(/\\(.)/g, '$1') ?? plain[2]) : undefined;
}
