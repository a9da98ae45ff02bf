import { prepareInput, type ImageInput } from './input.js';

/** What `GET /v1/jobs/{id}` answers. */
export interface JobStatus {
  id: string;
  state: 'queued' | 'running' | 'succeeded' | 'failed' | 'canceled';
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  /** When the results go. */
  expiresAt: string | null;
  progress: { total: number; done: number; failed: number; canceled: number; fraction: number };
  images: {
    n: number;
    name: string;
    state: 'queued' | 'running' | 'done' | 'failed' | 'canceled';
    result?: { url: string; contentType: string; filename: string; bytes: number; width: number; height: number };
    error?: { code: string; detail: string };
  }[];
}

export interface CreateJobOptions {
  /** Output options for every image, as `/v1/remove-bg` takes them (`format`, `size`, ...). */
  options?: Record<string, string | number | boolean>;
  /** Where the job's signed events are POSTed. */
  callbackUrl?: string;
  /** A retry with the same key and batch gets the same job. Default: a new UUID per call, the same on its retries. */
  idempotencyKey?: string;
  signal?: AbortSignal;
}

type Send = (
  path: string,
  request: { method: string; body?: () => FormData | string; headers?: Record<string, string> },
  options: { signal?: AbortSignal | undefined; timeoutMs?: number | undefined },
) => Promise<{ response: Response; attempts: number }>;

const isUrl = (input: ImageInput) => typeof input === 'string' && /^https?:\/\//i.test(input);

/** `client.jobs`: batches that outlive a connection (`/v1/jobs`). */
export class JobsClient {
  constructor(
    private readonly send: Send,
    private readonly maxInputBytes: number,
  ) {}

  /** Starts a job over files (paths, bytes, Blobs) or URLs (all of one kind); resolves with its first status. */
  async create(inputs: ImageInput[], options: CreateJobOptions = {}): Promise<{ id: string; statusUrl: string }> {
    if (inputs.length === 0) throw new RangeError('a job needs at least one image');
    const headers: Record<string, string> = { 'idempotency-key': options.idempotencyKey ?? globalThis.crypto.randomUUID() };
    let body: () => FormData | string;
    if (inputs.every(isUrl)) {
      const json = JSON.stringify({ image_urls: inputs, ...options.options, ...(options.callbackUrl ? { callback_url: options.callbackUrl } : {}) });
      headers['content-type'] = 'application/json';
      body = () => json;
    } else {
      const prepared = await Promise.all(inputs.map((input) => prepareInput(input, undefined, this.maxInputBytes)));
      body = () => {
        const form = new FormData();
        for (const [name, value] of Object.entries(options.options ?? {})) form.append(name, String(value));
        if (options.callbackUrl) form.append('callback_url', options.callbackUrl);
        for (const file of prepared) {
          if (file.kind !== 'file') throw new TypeError('a job takes files or URLs, not both');
          form.append('file', file.blob, file.filename);
        }
        return form;
      };
    }
    const { response } = await this.send('/v1/jobs', { method: 'POST', body, headers }, { signal: options.signal });
    return (await response.json()) as { id: string; statusUrl: string };
  }

  async get(id: string, options: { signal?: AbortSignal } = {}): Promise<JobStatus> {
    const { response } = await this.send(`/v1/jobs/${encodeURIComponent(id)}`, { method: 'GET' }, options);
    return (await response.json()) as JobStatus;
  }

  /** Polls until the job has ended; `onProgress` hears every status seen. */
  async wait(id: string, options: { intervalMs?: number; signal?: AbortSignal; onProgress?: (status: JobStatus) => void } = {}): Promise<JobStatus> {
    for (;;) {
      const status = await this.get(id, options);
      options.onProgress?.(status);
      if (status.state !== 'queued' && status.state !== 'running') return status;
      await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 1000));
      options.signal?.throwIfAborted();
    }
  }

  /** The cutout of image `n`. */
  async result(id: string, n: number, options: { signal?: AbortSignal } = {}): Promise<{ image: Uint8Array; contentType: string }> {
    const { response } = await this.send(`/v1/jobs/${encodeURIComponent(id)}/results/${n}`, { method: 'GET' }, options);
    return { image: new Uint8Array(await response.arrayBuffer()), contentType: response.headers.get('content-type') ?? 'application/octet-stream' };
  }

  /** Every result done, as the bytes of one ZIP. */
  async results(id: string, options: { signal?: AbortSignal } = {}): Promise<Uint8Array> {
    const { response } = await this.send(`/v1/jobs/${encodeURIComponent(id)}/results`, { method: 'GET' }, options);
    return new Uint8Array(await response.arrayBuffer());
  }

  /** Cancels the images that have not started. */
  async cancel(id: string, options: { signal?: AbortSignal } = {}): Promise<JobStatus> {
    const { response } = await this.send(`/v1/jobs/${encodeURIComponent(id)}`, { method: 'DELETE' }, options);
    return (await response.json()) as JobStatus;
  }
}
