import { createHash, randomUUID } from 'node:crypto';
import { zipSync } from 'fflate';
import { authenticate, type Identity } from '../auth/authenticate.js';
import type { KeyStore } from '../auth/key-store.js';
import { ApiError } from '../errors.js';
import type { CoreRequest, CoreResponse } from '../http-types.js';
import type { IdempotencyStore, IdempotencyTimes } from '../idempotency/store.js';
import type { ModelVerifier } from '../inference/model-verifier.js';
import { checkPlanOptions, checkPlanQuality, chooseModel, maxUploadBytes } from '../limits/plan-policy.js';
import { jobLimitsOf } from '../limits/plans.js';
import type { PlanEnforcer } from '../limits/plan-enforcer.js';
import { parseOutputOptions } from '../output-options.js';
import { admit, type AdmissionDeps } from '../pipeline/admission.js';
import type { RequestScope } from '../pipeline/request-scope.js';
import { jsonResponse } from '../pipeline/responses.js';
import { untilAborted } from '../../util/abortable.js';
import { finishJob, inputName, outputName, type RunnerDeps } from './runner.js';
import { newJob, publicView, TERMINAL_STATES, type ImageSource, type JobRecord } from './job.js';
import type { JobStore } from './job-store.js';
import type { JobQueue } from './queue.js';
import { readBatch, type Batch } from './read-batch.js';
import type { ResultsStore } from './results-store.js';
import { checkCallbackUrl, type CallbackPolicy } from './webhooks/callback-policy.js';
import type { WebhookSecretStore } from './webhooks/secrets.js';

export const JOBS_PATH = '/v1/jobs';

export interface JobRoutesDeps {
  keyStore: KeyStore;
  admission: AdmissionDeps;
  enforcer: PlanEnforcer;
  verifier: ModelVerifier;
  models: Record<string, unknown>;
  defaultModel: string;
  upload: { maxFileBytes: number; maxFields: number; maxFieldBytes: number };
  /** All files of one job together, in bytes. */
  maxBatchBytes: number;
  jobs: JobStore;
  results: ResultsStore;
  queue: JobQueue;
  idempotency: { store: IdempotencyStore; times: IdempotencyTimes };
  callbackPolicy: CallbackPolicy;
  /** Without it, `callback_url` is refused (400 `invalid_option`). */
  secrets: WebhookSecretStore | undefined;
  events: Pick<RunnerDeps, 'onEvent' | 'onInternalError'>;
  now: () => number;
}

/** `/v1/jobs...` as its steps: which route, then that route's steps. Runs inside `respond`. */
export async function jobsRoute(scope: RequestScope, deps: JobRoutesDeps): Promise<CoreResponse> {
  const { request } = scope;
  const route = parseJobPath(request.url);
  if (!route) throw new ApiError('not_found');
  if (route.kind === 'collection') {
    if (request.method !== 'POST') throw new ApiError('method_not_allowed', { headers: { allow: 'POST' } });
    return createJob(scope, route.base, deps);
  }
  const allow = route.kind === 'job' ? 'GET, DELETE' : 'GET';
  if (request.method !== 'GET' && !(route.kind === 'job' && request.method === 'DELETE')) {
    throw new ApiError('method_not_allowed', { headers: { allow }, detail: `Use ${allow.replace(', ', ' or ')}.` });
  }
  const identity = await untilAborted(authenticate(request, deps.keyStore, (known) => (scope.identity = known)), scope.signal);
  const job = await ownJob(route.id, identity, deps);
  if (route.kind === 'job' && request.method === 'DELETE') return cancelJob(job, route.base, deps);
  if (route.kind === 'job') return jsonResponse(200, { 'cache-control': 'no-store' }, publicView(job, route.base));
  if (route.kind === 'zip') return zipOfResults(job, deps);
  return resultOf(job, route.n, deps);
}

type JobPath = { base: string } & ({ kind: 'collection' } | { kind: 'job'; id: string } | { kind: 'zip'; id: string } | { kind: 'result'; id: string; n: string });

/** The route below `/v1/jobs`, wherever the adapter mounted it (`base` is the collection's path as requested). */
export function parseJobPath(url: string): JobPath | undefined {
  const pathname = new URL(url, 'http://localhost').pathname;
  const at = pathname.lastIndexOf(JOBS_PATH);
  if (at < 0) return undefined;
  const base = pathname.slice(0, at + JOBS_PATH.length);
  const rest = pathname.slice(at + JOBS_PATH.length).split('/').filter(Boolean);
  if (rest.length === 0) return { base, kind: 'collection' };
  const id = rest[0]!;
  if (rest.length === 1) return { base, kind: 'job', id };
  if (rest[1] !== 'results' || rest.length > 3) return undefined;
  if (rest.length === 2) return { base, kind: 'zip', id };
  return { base, kind: 'result', id, n: rest[2]! };
}

/** The job, if it is this account's: another account's job is as unknown as one that never was. */
async function ownJob(id: string, identity: Identity, deps: JobRoutesDeps): Promise<JobRecord> {
  const job = /^[0-9a-f-]{36}$/.test(id) ? await deps.jobs.get(id) : undefined;
  if (!job || job.accountId !== identity.account.id) throw new ApiError('job_not_found');
  return job;
}

/** POST /v1/jobs: admitted like a cutout request, the batch read and checked, stored, queued; 202. */
async function createJob(scope: RequestScope, base: string, deps: JobRoutesDeps): Promise<CoreResponse> {
  const { request, signal } = scope;
  const admitted = await admit(scope, deps.admission);
  const { identity, plan } = admitted;
  const limits = jobLimitsOf(plan);
  const idempotencyHeader = request.headers['idempotency-key'];
  if (idempotencyHeader !== undefined && (typeof idempotencyHeader !== 'string' || !/^[\x21-\x7e]{1,255}$/.test(idempotencyHeader))) {
    throw new ApiError('invalid_idempotency_key', { detail: 'Idempotency-Key must be one header of 1 to 255 visible ASCII characters (a UUID is a good key).' });
  }
  // The options first (from the query), so a request the plan refuses is refused before its upload.
  const early = parseOutputOptions({}, request.url, request.headers);
  checkPlanOptions(plan, early.requested);
  const batch = await readBatch(
    request.body,
    request.headers,
    { ...deps.upload, maxFileBytes: maxUploadBytes(plan, deps.upload.maxFileBytes), maxImages: limits.maxBatchImages, maxTotalBytes: deps.maxBatchBytes },
    signal,
  );
  scope.uploadDone();
  const { options, requested } = parseOutputOptions(batch.fields, request.url, request.headers);
  // A job's images are fetched and rendered later, one by one: a background photo is not kept for them (yet).
  if (options.bgImageUrl) throw new ApiError('invalid_option', { detail: 'bg_image_url: not available for jobs; use POST /v1/remove-bg.' });
  checkPlanOptions(plan, requested);
  checkPlanQuality(plan, options.quality);
  await untilAborted(deps.verifier.ensure(chooseModel(options.model, plan, deps.models, deps.defaultModel)), signal);
  if (batch.files.length + batch.urls.length === 0) throw new ApiError('batch_empty');
  if (batch.callbackUrl !== undefined) {
    if (!deps.secrets) throw new ApiError('invalid_option', { detail: 'callback_url: this API sends no webhooks.' });
    await checkCallbackUrl(batch.callbackUrl, deps.callbackPolicy, (reason) => deps.events.onInternalError(new Error(reason)));
    if (!(await deps.secrets.get(identity.account.id))) throw new ApiError('webhook_secret_missing');
  }

  // Idempotency-Key: a retry of the same batch gets the same job; the same key for another batch is 422.
  let claim: { key: string; token: string; lease: { keep(): void } } | undefined;
  if (typeof idempotencyHeader === 'string') {
    const key = `${identity.account.id}:${idempotencyHeader}`;
    const token = randomUUID();
    const found = await deps.idempotency.store.claim(key, fingerprintOf(request.url, batch), token, deps.idempotency.times).catch((error: unknown) => {
      throw new ApiError('service_unavailable', { detail: 'The idempotency store cannot be reached.', headers: { 'retry-after': '5' }, cause: error });
    });
    if (found.state !== 'claimed' && found.fingerprint !== fingerprintOf(request.url, batch)) {
      throw new ApiError('idempotency_key_reused', { detail: 'This Idempotency-Key was used for a different request in the last 24 hours.' });
    }
    if (found.state === 'in-progress') throw new ApiError('idempotency_key_in_use', { headers: { 'retry-after': '2' } });
    if (found.state === 'done') {
      if (!found.result) throw new ApiError('idempotency_result_gone');
      return { ...found.result, headers: { ...found.result.headers, ...scope.rateHeaders, 'idempotent-replayed': 'true' } };
    }
    // Given up if accepting the job fails on the way; kept once it is queued.
    claim = { key, token, lease: scope.hold(() => deps.idempotency.store.abandon(key, token)) };
  }

  const id = randomUUID();
  const sources: ImageSource[] = batch.files.length > 0 ? batch.files.map((file) => ({ kind: 'file', filename: file.filename })) : batch.urls.map((url) => ({ kind: 'url', url }));
  const job = newJob({
    id,
    accountId: identity.account.id,
    plan: identity.account.plan,
    fields: batch.fields,
    sources,
    callbackUrl: batch.callbackUrl,
    createdAt: new Date(deps.now()).toISOString(),
    retentionMs: limits.retentionMs,
  });
  await Promise.all(batch.files.map((file, n) => deps.results.put(id, inputName(n), file.file)));
  await deps.jobs.create(job);
  await deps.queue.enqueue(id);

  const statusUrl = `${base}/${id}`;
  const response = jsonResponse(202, { ...scope.rateHeaders, location: statusUrl, 'cache-control': 'no-store' }, { id, state: job.state, statusUrl, images: sources.length });
  if (claim) {
    const { key, token, lease } = claim;
    lease.keep();
    await deps.idempotency.store
      .complete(key, token, { status: response.status, headers: { location: statusUrl, 'content-type': 'application/json' }, body: response.body }, deps.idempotency.times)
      .catch(deps.events.onInternalError);
  }
  return response;
}

/** DELETE: images not yet started are canceled; those running finish. A job with nothing running ends now. */
async function cancelJob(job: JobRecord, base: string, deps: JobRoutesDeps): Promise<CoreResponse> {
  if (!TERMINAL_STATES.has(job.state)) {
    for (const [n, image] of job.images.entries()) {
      if (image.state !== 'queued') continue;
      image.state = 'canceled';
      await deps.jobs.setImage(job.id, n, image);
    }
    if (!job.images.some((image) => image.state === 'running')) {
      await finishJob(job, { jobs: deps.jobs, results: deps.results, ...deps.events, now: deps.now });
    }
  }
  const current = (await deps.jobs.get(job.id)) ?? job;
  return jsonResponse(200, { 'cache-control': 'no-store' }, publicView(current, base));
}

function checkNotExpired(job: JobRecord, now: number): void {
  if (job.expiresAt && Date.parse(job.expiresAt) <= now) throw new ApiError('results_expired');
}

async function resultOf(job: JobRecord, rawN: string, deps: JobRoutesDeps): Promise<CoreResponse> {
  const n = /^\d{1,6}$/.test(rawN) ? Number(rawN) : -1;
  const image = job.images[n];
  if (!image) throw new ApiError('not_found', { detail: `This job has images 0 to ${job.images.length - 1}.` });
  checkNotExpired(job, deps.now());
  if (image.state !== 'done' || !image.result) {
    throw new ApiError('result_not_ready', { detail: image.error ? `Image ${n} failed: ${image.error.code}.` : `Image ${n} is ${image.state}.` });
  }
  const body = await deps.results.get(job.id, outputName(n));
  if (!body) throw new ApiError('results_expired');
  return {
    status: 200,
    headers: {
      'content-type': image.result.contentType,
      'content-length': String(body.length),
      'content-disposition': `attachment; filename="${asciiName(image.result.filename)}"`,
      'cache-control': 'private, max-age=3600',
      'x-width': String(image.result.width),
      'x-height': String(image.result.height),
    },
    body,
  };
}

/** Every result done so far, in one ZIP (stored, not deflated: PNG and WebP are compressed already). */
async function zipOfResults(job: JobRecord, deps: JobRoutesDeps): Promise<CoreResponse> {
  checkNotExpired(job, deps.now());
  const entries: Record<string, Uint8Array> = {};
  const used = new Set<string>();
  for (const [n, image] of job.images.entries()) {
    if (image.state !== 'done' || !image.result) continue;
    const body = await deps.results.get(job.id, outputName(n));
    if (!body) throw new ApiError('results_expired');
    // Numbered, so two uploads of the same name stay apart and the order is the batch's.
    let name = `${String(n).padStart(4, '0')}-${asciiName(image.result.filename)}`;
    while (used.has(name)) name = `_${name}`;
    used.add(name);
    entries[name] = body;
  }
  if (used.size === 0) throw new ApiError('result_not_ready', { detail: 'No image of this job is done yet.' });
  const body = Buffer.from(zipSync(entries, { level: 0 }));
  return {
    status: 200,
    headers: {
      'content-type': 'application/zip',
      'content-length': String(body.length),
      'content-disposition': `attachment; filename="job-${job.id}.zip"`,
      'cache-control': 'no-store',
    },
    body,
  };
}

function asciiName(name: string): string {
  return name.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 120) || 'image';
}

/** Same batch: same path and query, options, callback, and the same files (by hash, in order) or URLs. */
function fingerprintOf(url: string, batch: Batch): string {
  const hash = createHash('sha256');
  const part = (value: string) => hash.update(`${Buffer.byteLength(value)}:${value}`);
  part(`jobs ${url}`);
  part(batch.callbackUrl ?? '');
  for (const [name, value] of Object.entries(batch.fields).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    part(name);
    part(value);
  }
  for (const file of batch.files) {
    part(file.filename);
    hash.update(createHash('sha256').update(file.file).digest());
  }
  for (const url of batch.urls) part(url);
  return hash.digest('hex');
}
