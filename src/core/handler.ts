import type { Readable } from 'node:stream';
import { authenticate, type Identity } from './auth/authenticate.js';
import { ApiError, problemOf } from './errors.js';
import type { CoreRequest, CoreResponse } from './http-types.js';
import { renderOutput, type Rendered } from './image/output.js';
import { decodeFullSize, probeImage, segment, type Segmentation } from './image/pipeline.js';
import { Budget } from './limits/budget.js';
import { InferenceClient, ModelMismatchError } from './inference/inference-client.js';
import { PlanEnforcer, rateLimitHeaders } from './limits/plan-enforcer.js';
import { ApiMetrics } from './metrics.js';
import { maxBodyBytes, readUpload } from './multipart.js';
import { resolveOptions, type RemoveBgOptions } from './options.js';
import { parseOutputOptions, type OutputOptionName, type OutputOptions } from './output-options.js';
import type { Plan } from './limits/plans.js';
import { apiDocsRoutes } from '../openapi/routes.js';

export interface Route {
  /** Path below wherever the adapter mounts the routes. */
  path: string;
  handle(request: CoreRequest): Promise<CoreResponse>;
}

export interface RemoveBgHandler {
  /** `POST /v1/remove-bg`. Never rejects: every failure becomes a response. */
  handle(request: CoreRequest): Promise<CoreResponse>;
  /** `GET /v1/account`: the caller's plan, limits, usage and what remains. */
  account(request: CoreRequest): Promise<CoreResponse>;
  /** Prometheus text of this instance's metrics. */
  metrics(request: CoreRequest): Promise<CoreResponse>;
  /** Every route, for adapters to mount (`/metrics` only with `exposeMetrics`). */
  routes: Route[];
  /**
   * Resolves once the inference server answers and its model fits the preprocessing profile;
   * rejects on a mismatch, or when the server stays unreachable past `startupTimeoutMs`.
   * Call it before listening, so a misconfiguration fails at start-up.
   */
  ready(): Promise<void>;
  close(): Promise<void>;
}

/** How often ready() retries a server that is not up yet, and how long one check may take. */
const READY_RETRY_MS = 500;
const READY_CALL_MS = 5_000;

export function createRemoveBgHandler(options: RemoveBgOptions): RemoveBgHandler {
  const config = resolveOptions(options);
  const client = new InferenceClient({
    address: config.inference.address,
    timeoutMs: config.inference.timeoutMs,
    maxMessageBytes: config.inference.maxMessageBytes,
    retryAfterSeconds: config.inference.retryAfterSeconds,
    tls: config.inference.tls,
  });
  const enforcer = new PlanEnforcer({
    plans: config.plans,
    redis: config.redis,
    redisFailureMode: config.redisFailureMode,
    insuranceInstances: config.insuranceInstances,
  });
  const verified = new Set<string>();
  let inFlight = 0;
  const metrics = new ApiMetrics();
  // Memory bounds of the image work: model inputs in flight (each a 12 MiB tensor plus its gRPC
  // copies), and full-size pixels being decoded, composed and encoded.
  const inferenceSlots = new Budget(config.limits.maxConcurrentInferences);
  const pixelBudget = new Budget(config.limits.maxPixelsInProcess);

  async function ready(): Promise<void> {
    const deadline = Date.now() + config.inference.startupTimeoutMs;
    for (const [name, profile] of Object.entries(config.inference.models)) {
      for (;;) {
        try {
          await client.verifyModel(name, profile, READY_CALL_MS);
          verified.add(name);
          break;
        } catch (error) {
          if (error instanceof ModelMismatchError || Date.now() > deadline) throw error;
          await new Promise((r) => setTimeout(r, READY_RETRY_MS));
        }
      }
    }
  }

  /** The first request for a model after start checks it once, if ready() was not awaited. */
  async function ensureVerified(name: string): Promise<void> {
    if (verified.has(name)) return;
    try {
      await client.verifyModel(name, config.inference.models[name]!, READY_CALL_MS);
      verified.add(name);
    } catch (error) {
      if (error instanceof ModelMismatchError) throw error;
      throw new ApiError('inference_unavailable', {
        headers: { 'retry-after': String(config.inference.retryAfterSeconds) },
        cause: error,
      });
    }
  }

  /** The model a request asked for (or the default), if it exists and its plan allows it. */
  function chooseModel(requested: string | undefined, plan: Plan): string {
    const name = requested ?? config.inference.modelName;
    if (!Object.hasOwn(config.inference.models, name)) {
      throw new ApiError('invalid_option', { detail: `model: unknown model "${name}"; models are ${Object.keys(config.inference.models).join(', ')}` });
    }
    if (plan.models && !plan.models.includes(name)) {
      throw new ApiError('option_not_in_plan', { detail: `The plan does not include the model "${name}".` });
    }
    return name;
  }

  const modelFor = (name: string) => {
    const profile = config.inference.models[name]!;
    return async (input: Float32Array, signal: AbortSignal) => {
      const output = await client.infer(name, { name: profile.inputName, shape: [1, 3, profile.height, profile.width], data: input }, profile.outputName, signal);
      return { mask: output.data, serverRunMs: output.serverRunMs };
    };
  };

  /** Runs one route's work, turning every failure into a problem response, and logs it. */
  async function respond(
    route: string,
    request: CoreRequest,
    work: (state: { identity?: Identity; headers: Record<string, string> }) => Promise<CoreResponse>,
  ): Promise<CoreResponse> {
    const started = performance.now();
    const state: { identity?: Identity; headers: Record<string, string> } = { headers: {} };
    let response: CoreResponse;
    let code: string | undefined;
    try {
      response = await work(state);
    } catch (error) {
      settleBody(request.body, maxBodyBytes(uploadLimits(config.limits.maxUploadBytes)));
      const apiError = asApiError(error);
      code = apiError.code;
      // Every answer to an identified account carries its rate-limit headers, refusals too.
      if (state.identity && Object.keys(state.headers).length === 0) {
        const standing = await enforcer.standing(state.identity.account.id, state.identity.account.plan).catch(() => undefined);
        if (standing) state.headers = rateLimitHeaders(standing.rate);
      }
      response = problemResponse(apiError, { ...state.headers, ...apiError.headers });
    }
    metrics.requests.inc({ route, status: String(response.status), code: code ?? '' });
    metrics.duration.observe({ route }, (performance.now() - started) / 1000);
    metrics.bytesOut.inc(response.body.length);
    config.onResponse?.({
      method: request.method,
      route,
      status: response.status,
      ...(code ? { code } : {}),
      ...(state.identity ? { keyId: state.identity.keyId, accountId: state.identity.account.id } : {}),
      durationMs: Math.round(performance.now() - started),
      bytesOut: response.body.length,
    });
    return response;
  }

  function uploadLimits(maxFileBytes: number) {
    return {
      maxFileBytes,
      maxFields: config.limits.maxFields,
      maxFieldBytes: config.limits.maxFieldBytes,
      timeoutMs: config.limits.uploadTimeoutMs,
    };
  }

  function handle(request: CoreRequest): Promise<CoreResponse> {
    return respond('/v1/remove-bg', request, async (state) => {
      if (request.method !== 'POST') throw new ApiError('method_not_allowed', { headers: { allow: 'POST' } });
      // Who, then whether they may, and only then the body: a refused request is never parsed.
      const identity = await authenticate(request, config.keyStore, (known) => (state.identity = known));
      const plan = enforcer.plan(identity.account.plan);
      // Backpressure: refuse at once, before the upload is read, when this instance is full or
      // every inference server just said it was.
      const busy = { 'retry-after': String(config.inference.retryAfterSeconds) };
      if (inFlight >= config.limits.maxInFlight) throw new ApiError('server_busy', { headers: busy });
      if (client.saturated()) throw new ApiError('inference_unavailable', { headers: busy, detail: 'Every inference server is busy. Retry after the time in Retry-After.' });
      const admission = await enforcer.admit(identity.account.id, identity.account.plan);
      state.headers = admission.headers;
      inFlight++;
      metrics.inFlight.set(inFlight);
      try {
        // Options in the query string are checked before the upload is read.
        const early = parseOutputOptions({}, request.url, request.headers);
        checkPlanOptions(plan, early.requested);
        await ensureVerified(chooseModel(early.options.model, plan));
        const maxUpload = Math.min(config.limits.maxUploadBytes, plan.maxUploadBytes ?? Infinity);
        const upload = await readUpload(request.body, request.headers, uploadLimits(maxUpload), request.signal);
        metrics.bytesIn.inc(upload.file.length);
        const { options: output, requested } = parseOutputOptions(upload.fields, request.url, request.headers);
        checkPlanOptions(plan, requested);
        const modelName = chooseModel(output.model, plan);
        await ensureVerified(modelName);
        const probe = await probeImage(upload.file, { maxInputPixels: config.limits.maxInputPixels });
        const pixels = probe.width * probe.height;
        if (plan.maxInputMegapixels !== undefined && pixels > plan.maxInputMegapixels * 1e6) {
          throw new ApiError('plan_image_too_large', {
            detail: `The image is ${(pixels / 1e6).toFixed(1)} MP; the plan allows ${plan.maxInputMegapixels} MP.`,
          });
        }
        const maxOutputPixels = plan.maxOutputMegapixels === undefined ? Infinity : plan.maxOutputMegapixels * 1e6;
        if (output.size === 'full' && pixels > maxOutputPixels) {
          throw new ApiError('option_not_in_plan', {
            detail: `size=full would be ${(pixels / 1e6).toFixed(1)} MP; the plan allows ${plan.maxOutputMegapixels} MP of output (use size=auto).`,
          });
        }
        const refund = await enforcer.reserveQuota(identity.account.id, identity.account.plan, pixels);
        let segmentation: Segmentation;
        let rendered: Rendered;
        try {
          const imageLimits = { maxInputPixels: config.limits.maxInputPixels };
          const releaseSlot = await inferenceSlots.take(1);
          // Decode the full size while the model runs when there is memory for it now; else later.
          let releasePixels = pixelBudget.tryTake(pixels);
          try {
            segmentation = await segment(
              upload.file,
              probe,
              config.inference.models[modelName]!,
              modelFor(modelName),
              imageLimits,
              request.signal,
              Boolean(releasePixels),
            );
          } catch (error) {
            releasePixels?.();
            throw error;
          } finally {
            releaseSlot();
          }
          releasePixels ??= await pixelBudget.take(pixels);
          try {
            await decodeFullSize(segmentation, imageLimits);
            rendered = await renderOutput(segmentation, output, {
              pngCompressionLevel: config.pngCompressionLevel,
              maxOutputPixels,
              foregroundEstimation: config.foregroundEstimation,
            });
          } finally {
            releasePixels();
          }
        } catch (error) {
          await refund();
          throw error;
        }
        await enforcer.recordUsage(identity.account.id, pixels).catch((error: unknown) => config.onInternalError(error));
        const timings = stageTimings(segmentation, rendered);
        for (const [stage, ms] of Object.entries(timings)) metrics.stages.observe({ stage }, ms / 1000);
        return success(timings, rendered, output, upload.filename, state.headers);
      } finally {
        inFlight--;
        metrics.inFlight.set(inFlight);
        await admission.release();
      }
    });
  }

  function account(request: CoreRequest): Promise<CoreResponse> {
    return respond('/v1/account', request, async (state) => {
      if (request.method !== 'GET') throw new ApiError('method_not_allowed', { headers: { allow: 'GET' }, detail: 'Use GET.' });
      const identity = await authenticate(request, config.keyStore, (known) => (state.identity = known));
      const plan = enforcer.plan(identity.account.plan);
      const standing = await enforcer.standing(identity.account.id, identity.account.plan);
      state.headers = rateLimitHeaders(standing.rate);
      const body = Buffer.from(
        JSON.stringify({
          account: { id: identity.account.id, status: identity.account.status },
          keyId: identity.keyId,
          plan: {
            name: identity.account.plan,
            requestsPerMinute: plan.requestsPerMinute,
            burst: plan.burst ?? 0,
            maxConcurrent: plan.maxConcurrent ?? null,
            maxUploadBytes: Math.min(config.limits.maxUploadBytes, plan.maxUploadBytes ?? Infinity),
            maxInputMegapixels: Math.min(config.limits.maxInputPixels / 1e6, plan.maxInputMegapixels ?? Infinity),
            monthlyQuota: plan.monthlyQuota ?? null,
            outputOptions: plan.outputOptions ?? null,
          },
          usage: standing.usage,
          quota: standing.quota,
          rate: standing.rate,
          inProgress: standing.inProgress,
        }),
      );
      return {
        status: 200,
        headers: { ...state.headers, 'content-type': 'application/json', 'content-length': String(body.length), 'cache-control': 'no-store' },
        body,
      };
    });
  }

  function asApiError(error: unknown): ApiError {
    if (error instanceof ApiError) {
      if (error.status >= 500 && error.code !== 'inference_unavailable' && error.code !== 'inference_timeout') {
        config.onInternalError(error.cause ?? error);
      }
      return error;
    }
    config.onInternalError(error);
    return new ApiError('internal_error', { cause: error });
  }

  function problemResponse(error: ApiError, headers: Record<string, string>): CoreResponse {
    const body = Buffer.from(JSON.stringify(problemOf(error, config.problemTypeBase)));
    return {
      status: error.status,
      headers: {
        ...headers,
        'content-type': 'application/problem+json',
        'content-length': String(body.length),
        'cache-control': 'no-store',
      },
      body,
    };
  }

  async function metricsRoute(request: CoreRequest): Promise<CoreResponse> {
    if (request.method !== 'GET') {
      return problemResponse(new ApiError('method_not_allowed', { detail: 'Use GET.' }), { allow: 'GET' });
    }
    const body = Buffer.from(await metrics.registry.metrics());
    return { status: 200, headers: { 'content-type': metrics.registry.contentType, 'content-length': String(body.length) }, body };
  }

  return {
    handle,
    account,
    metrics: metricsRoute,
    routes: [
      { path: '/v1/remove-bg', handle },
      { path: '/v1/account', handle: account },
      ...(config.exposeMetrics ? [{ path: '/metrics', handle: metricsRoute }] : []),
      ...(config.apiDocs ? apiDocsRoutes(docsContext(config)) : []),
    ],
    ready,
    async close() {
      client.close();
    },
  };
}

/** What the OpenAPI document says that depends on this handler's configuration. */
function docsContext(config: ReturnType<typeof resolveOptions>) {
  return {
    serverUrl: config.publicBaseUrl,
    maxUploadBytes: config.limits.maxUploadBytes,
    models: Object.keys(config.inference.models),
    defaultModel: config.inference.modelName,
    problemTypeBase: config.problemTypeBase,
  };
}

/** 403 when the request sets an output option its plan does not include. */
function checkPlanOptions(plan: Plan, requested: OutputOptionName[]): void {
  if (!plan.outputOptions) return;
  const refused = requested.find((name) => !plan.outputOptions!.includes(name));
  if (refused) throw new ApiError('option_not_in_plan', { detail: `The plan does not include the option "${refused}".` });
}

/** `photo.jpg` -> `photo-nobg.png`; anything odd in the name is replaced, so the header stays safe. */
export function outputFilename(uploaded: string, extension: string): string {
  const base = uploaded.replace(/^.*[\\/]/, '').replace(/\.[^.]*$/, '').replace(/[^\p{L}\p{N}._ -]/gu, '_').slice(0, 100).trim();
  return `${base || 'image'}-nobg.${extension}`;
}

function contentDisposition(filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]/g, '_').replace(/["\\]/g, '_');
  return `inline; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(filename)}`;
}

/** Milliseconds per stage of one cutout: the segmentation's, then the rendering's. */
function stageTimings(segmentation: Segmentation, rendered: Rendered): Record<string, number> {
  const timings: Record<string, number> = {};
  for (const [stage, ms] of Object.entries(segmentation.timings)) timings[stage] = ms ?? 0;
  timings.postprocess = (timings.postprocess ?? 0) + rendered.timings.postprocess;
  timings.encode = rendered.timings.encode;
  return timings;
}

function success(
  timings: Record<string, number>,
  rendered: Rendered,
  output: OutputOptions,
  uploadedName: string,
  limitHeaders: Record<string, string>,
): CoreResponse {
  const serverTiming = Object.entries(timings)
    .map(([stage, ms]) => `${stage};dur=${ms.toFixed(1)}`)
    .join(', ');
  const filename = outputFilename(uploadedName, rendered.extension);
  const box = rendered.foreground;
  const headers: Record<string, string> = {
    ...limitHeaders,
    'cache-control': 'no-store',
    'x-width': String(rendered.width),
    'x-height': String(rendered.height),
    'x-foreground-top': String(box?.top ?? 0),
    'x-foreground-left': String(box?.left ?? 0),
    'x-foreground-width': String(box?.width ?? 0),
    'x-foreground-height': String(box?.height ?? 0),
    'server-timing': serverTiming,
  };
  if (output.response === 'json') {
    const body = Buffer.from(
      JSON.stringify({
        contentType: rendered.contentType,
        filename,
        width: rendered.width,
        height: rendered.height,
        foreground: box,
        data: rendered.body.toString('base64'),
      }),
    );
    return { status: 200, headers: { ...headers, 'content-type': 'application/json', 'content-length': String(body.length) }, body };
  }
  return {
    status: 200,
    headers: {
      ...headers,
      'content-type': rendered.contentType,
      'content-length': String(rendered.body.length),
      'content-disposition': contentDisposition(filename),
    },
    body: rendered.body,
  };
}

/**
 * A request answered before its body was read (refused, or an upload over a limit): read and
 * discard the rest so the client, still sending, gets to read the answer on a live connection,
 * but stop once it has sent more than any valid request could, by closing the connection.
 */
function settleBody(body: Readable, capBytes: number): void {
  if (body.readableEnded || body.destroyed) return;
  let discarded = 0;
  const onData = (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > capBytes) {
      body.off('data', onData);
      body.destroy();
    }
  };
  body.on('data', onData);
  body.on('error', () => {});
  body.resume();
}
