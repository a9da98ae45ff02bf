import { setTimeout as delay } from 'node:timers/promises';
import { ApiError } from '../errors.js';
import { fetchImage } from '../image-url/fetch-image.js';
import type { ResolvedImageUrlOptions } from '../image-url/options.js';
import { finalState, imageFinished, TERMINAL_STATES, type ImageStatus, type JobRecord } from './job.js';
import type { JobStore } from './job-store.js';
import type { ResultsStore } from './results-store.js';
import type { ImageResult } from './image-cutout.js';

/** Something that happened to a job that its callback is told of. */
export type JobEventType = 'job.started' | 'job.completed';

export interface RunnerDeps {
  jobs: JobStore;
  results: ResultsStore;
  /** One image through the cutout pipeline (image-cutout.ts). */
  cutout: (job: JobRecord, n: number, attempt: number, image: { file: Buffer; filename: string }, signal: AbortSignal) => Promise<ImageResult>;
  imageUrl: ResolvedImageUrlOptions & { onRefusal?: ((refusal: Error) => void) | undefined };
  maxUploadBytes: number;
  /** Images of one job run at once. Default 2. */
  imageConcurrency?: number;
  /** Tries of an image that failed for a passing reason (inference busy or down). Default 3. */
  attempts?: number;
  /** Wait before try `k` (from 1), in ms. Default 1 s, 2 s, 4 s... */
  retryDelayMs?: (attempt: number) => number;
  /** Told once per event (the webhook sender; it makes them once across instances). */
  onEvent: (type: JobEventType, job: JobRecord) => Promise<void>;
  onInternalError: (error: unknown) => void;
  now?: () => number;
}

/** Failures that say nothing about the image: tried again, then the image fails with them. */
const PASSING = new Set(['inference_unavailable', 'inference_timeout', 'server_busy', 'service_unavailable']);

export const inputName = (n: number) => `in-${n}`;
export const outputName = (n: number) => `out-${n}`;

/**
 * Runs a job: every image not yet finished, a few at a time, each stored and marked done before
 * the next event; then the job's end, its results' expiry and the `job.completed` event. Running
 * it again (the queue redelivered it) does only what is left, and the images' charges are named
 * (`job:<id>:<n>:<try>`), so nothing is done or charged twice.
 */
export async function runJob(jobId: string, signal: AbortSignal, deps: RunnerDeps): Promise<void> {
  const now = deps.now ?? Date.now;
  const job = await deps.jobs.get(jobId);
  if (!job) return;
  // Run again after its end (the instance that ended it died before the queue heard): its
  // `job.completed` may not have been sent; sending an event again is harmless (one id, one claim).
  if (TERMINAL_STATES.has(job.state)) return deps.onEvent('job.completed', job).catch(deps.onInternalError);
  if (job.state === 'queued') {
    job.state = 'running';
    job.startedAt = new Date(now()).toISOString();
    await deps.jobs.update(jobId, { state: 'running', startedAt: job.startedAt });
  }
  // Also on a run taken over from an instance that died: it may have died before sending it.
  await deps.onEvent('job.started', job).catch(deps.onInternalError);
  const left = job.images.map((image, n) => ({ image, n })).filter(({ image }) => !imageFinished(image));
  const concurrency = deps.imageConcurrency ?? 2;
  let next = 0;
  const lane = async () => {
    while (next < left.length) {
      const { n } = left[next++]!;
      signal.throwIfAborted();
      // DELETE may have canceled the job meanwhile: what has not started stays undone.
      const current = await deps.jobs.get(jobId);
      if (!current || current.state === 'canceled') return;
      if (imageFinished(current.images[n]!)) continue;
      await runImage(current, n, signal, deps);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, left.length) }, lane));

  const finished = await deps.jobs.get(jobId);
  if (!finished || TERMINAL_STATES.has(finished.state)) return;
  await finishJob(finished, deps);
}

/** Marks the job ended (its state from its images), sets when it and its results expire, and says so. */
export async function finishJob(job: JobRecord, deps: Pick<RunnerDeps, 'jobs' | 'results' | 'onEvent' | 'onInternalError' | 'now'>): Promise<void> {
  const now = (deps.now ?? Date.now)();
  const state = finalState(job);
  const expiresAt = now + job.retentionMs;
  const patch = { state, finishedAt: new Date(now).toISOString(), expiresAt: new Date(expiresAt).toISOString() };
  await deps.jobs.update(job.id, patch);
  // The record outlives its results by a day, so a late GET says "expired" rather than "unknown".
  await deps.jobs.forgetAt(job.id, expiresAt + 86_400_000);
  await deps.results.expireAt(job.id, expiresAt);
  await deps.onEvent('job.completed', { ...job, ...patch }).catch(deps.onInternalError);
}

async function runImage(job: JobRecord, n: number, signal: AbortSignal, deps: RunnerDeps): Promise<void> {
  await deps.jobs.setImage(job.id, n, { state: 'running' });
  const attempts = deps.attempts ?? 3;
  let status: ImageStatus;
  for (let attempt = 1; ; attempt++) {
    try {
      const image = await loadImage(job, n, signal, deps);
      const result = await deps.cutout(job, n, attempt, image, signal);
      await deps.results.put(job.id, outputName(n), result.body);
      status = { state: 'done', result: { contentType: result.contentType, filename: result.filename, bytes: result.body.length, width: result.width, height: result.height } };
      break;
    } catch (error) {
      // Shutting down: the image stays `running` for the instance that takes the job over.
      if (signal.aborted) throw signal.reason;
      const apiError = error instanceof ApiError ? error : undefined;
      if (!apiError) deps.onInternalError(error);
      if (apiError && PASSING.has(apiError.code) && attempt < attempts) {
        await sleep(deps.retryDelayMs?.(attempt) ?? 1000 * 2 ** (attempt - 1), signal);
        continue;
      }
      status = { state: 'failed', error: { code: apiError?.code ?? 'internal_error', detail: apiError?.message ?? 'Something went wrong on our side.' } };
      break;
    }
  }
  await deps.jobs.setImage(job.id, n, status);
  if (job.sources[n]!.kind === 'file') await deps.results.delete(job.id, inputName(n)).catch(deps.onInternalError);
}

async function loadImage(job: JobRecord, n: number, signal: AbortSignal, deps: RunnerDeps): Promise<{ file: Buffer; filename: string }> {
  const source = job.sources[n]!;
  if (source.kind === 'url') {
    const fetched = await fetchImage(source.url, { ...deps.imageUrl, maxBytes: deps.maxUploadBytes, signal });
    if (fetched.file.length === 0) throw new ApiError('missing_file', { detail: 'The image at image_url is empty.' });
    return { file: fetched.file, filename: fetched.filename };
  }
  const file = await deps.results.get(job.id, inputName(n));
  if (!file) throw new ApiError('internal_error', { detail: 'The uploaded image is no longer stored.' });
  return { file, filename: source.filename };
}

/** Waits `ms`; rejects with the signal's reason when it aborts first. */
async function sleep(ms: number, signal: AbortSignal): Promise<void> {
  await delay(ms, undefined, { signal }).catch(() => {
    throw signal.reason;
  });
}
