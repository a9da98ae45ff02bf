/** A job's state: `queued` until a worker takes it, `running`, then one of the three ends. */
export type JobState = 'queued' | 'running' | 'succeeded' | 'failed' | 'canceled';

/** One image's state; `failed` carries the problem code its own request would have got. */
export type ImageState = 'queued' | 'running' | 'done' | 'failed' | 'canceled';

/** Where one image of a job comes from: an uploaded file (kept in the results store until done) or a URL fetched when it runs. */
export type ImageSource = { kind: 'file'; filename: string } | { kind: 'url'; url: string };

export interface ImageStatus {
  state: ImageState;
  /** Set once done: what GET /v1/jobs/{id}/results/{n} answers. */
  result?: { contentType: string; filename: string; bytes: number; width: number; height: number };
  /** Set once failed: the stable problem code and its detail. */
  error?: { code: string; detail: string };
}

/** What is fixed when a job is accepted. */
export interface JobSpec {
  id: string;
  accountId: string;
  /** The account's plan when the job was accepted (its retention applies to the results). */
  plan: string;
  /** The output options, as form fields (as `/v1/remove-bg` takes them). */
  fields: Record<string, string>;
  sources: ImageSource[];
  callbackUrl?: string | undefined;
  createdAt: string;
  /** How long results are kept after the job ends, in ms (from the plan). */
  retentionMs: number;
}

/** Everything known about a job: its spec, and what has happened since. */
export interface JobRecord extends JobSpec {
  state: JobState;
  images: ImageStatus[];
  startedAt?: string | undefined;
  finishedAt?: string | undefined;
  /** After this the job and its results are gone (404, results 410). Set when it ends. */
  expiresAt?: string | undefined;
}

export const TERMINAL_STATES: ReadonlySet<JobState> = new Set(['succeeded', 'failed', 'canceled']);
const IMAGE_ENDS: ReadonlySet<ImageState> = new Set(['done', 'failed', 'canceled']);

export function newJob(spec: JobSpec): JobRecord {
  return { ...spec, state: 'queued', images: spec.sources.map(() => ({ state: 'queued' })) };
}

export function imageFinished(image: ImageStatus): boolean {
  return IMAGE_ENDS.has(image.state);
}

/** How the job ended, once every image has: succeeded if any image is done, failed if none is. */
export function finalState(job: JobRecord): JobState {
  if (job.images.every((image) => image.state === 'canceled')) return 'canceled';
  return job.images.some((image) => image.state === 'done') ? 'succeeded' : 'failed';
}

export interface JobProgress {
  total: number;
  done: number;
  failed: number;
  canceled: number;
  /** Images finished either way, as a fraction 0..1. */
  fraction: number;
}

export function progressOf(job: Pick<JobRecord, 'images'>): JobProgress {
  const count = (state: ImageState) => job.images.filter((image) => image.state === state).length;
  const total = job.images.length;
  const done = count('done');
  const failed = count('failed');
  const canceled = count('canceled');
  return { total, done, failed, canceled, fraction: total === 0 ? 1 : (done + failed + canceled) / total };
}

/** What GET /v1/jobs/{id} answers: never the account id or the callback's secret parts. */
export function publicView(job: JobRecord, basePath: string) {
  return {
    id: job.id,
    state: job.state,
    createdAt: job.createdAt,
    startedAt: job.startedAt ?? null,
    finishedAt: job.finishedAt ?? null,
    expiresAt: job.expiresAt ?? null,
    progress: progressOf(job),
    callback: job.callbackUrl ? { url: redactedUrl(job.callbackUrl) } : null,
    images: job.images.map((image, n) => ({
      n,
      name: sourceName(job.sources[n]!),
      state: image.state,
      ...(image.result ? { result: { ...image.result, url: `${basePath}/${job.id}/results/${n}` } } : {}),
      ...(image.error ? { error: image.error } : {}),
    })),
    resultsZip: job.images.some((image) => image.state === 'done') ? `${basePath}/${job.id}/results.zip` : null,
  };
}

function sourceName(source: ImageSource): string {
  return source.kind === 'file' ? source.filename : source.url;
}

/** The callback URL without its query string (which may carry a token). */
function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.origin}${parsed.pathname}`;
  } catch {
    return '';
  }
}
