import type { CoreRequest, CoreResponse, Route } from './http-types.js';
import { InferenceClient } from './inference/inference-client.js';
import { setStepAttributes, traceRequest, traceStep } from '../tracing/otel.js';
import { ModelVerifier } from './inference/model-verifier.js';
import type { MaskModel } from './image/pipeline.js';
import type { PreprocessingProfile } from './image/profile.js';
import { PixelPool } from './image/pixel-pool.js';
import { fastPngEncoderAvailable, fastPngEncoderError } from './image/png-encoder.js';
import { authenticate, type Identity } from './auth/authenticate.js';
import type { Account } from './auth/key-store.js';
import { accountSummary, type AccountSummary } from './account-summary.js';
import { Budget } from './limits/budget.js';
import { InFlight } from './limits/in-flight.js';
import { PlanEnforcer, rateLimitHeaders } from './limits/plan-enforcer.js';
import { ApiMetrics } from './metrics.js';
import { maxBodyBytes } from './multipart.js';
import { resolveOptions, type RemoveBgOptions } from './options.js';
import { ApiError } from './errors.js';
import { untilAborted } from '../util/abortable.js';
import { admit } from './pipeline/admission.js';
import { makeCutout, type CutoutDeps } from './pipeline/cutout.js';
import { idempotentRequest, type IdempotencyDeps } from './pipeline/idempotency.js';
import type { JsonAnswerRequest } from './pipeline/json-answer.js';
import { MemoryIdempotencyStore } from './idempotency/store.js';
import { RedisIdempotencyStore } from './idempotency/redis-store.js';
import { takeOrder } from './pipeline/order.js';
import { respond, type RespondDeps } from './pipeline/respond.js';
import { cutoutResponse, jsonResponse } from './pipeline/responses.js';
import { listModels } from './models/model-list.js';
import type { Cutout } from './pipeline/cutout.js';
import type { InputReader, Order } from './pipeline/order.js';
import type { Admitted } from './pipeline/admission.js';
import { QUALITY_QUOTA_WEIGHT } from './image/multi-pass.js';
import { quotaCost } from './limits/plans.js';
import { readRemoveBgRequest } from './removebg/read-request.js';
import type { RemoveBgRequest } from './removebg/parameters.js';
import { removeBgAccount, removeBgAnswer, removeBgError, wantsJson } from './removebg/answers.js';
import { createJobService } from './jobs/service.js';
import { cutoutImage } from './jobs/image-cutout.js';
import { JOBS_PATH } from './jobs/http.js';
import { releaseNow } from '../util/release-now.js';

export type { Route } from './http-types.js';

/** What the API reference (the OpenAPI document) says that depends on a handler's configuration. */
export interface ApiDocsContext {
  /** Configured public base URL; absent: where the document was fetched from. */
  serverUrl: string | undefined;
  maxUploadBytes: number;
  models: string[];
  defaultModel: string;
  problemTypeBase: string;
  /** Whether remove.bg's wire format is served beside bgcut's own. */
  removeBgApi: boolean;
}

export interface RemoveBgHandler {
  /** `POST /v1/remove-bg`. Never rejects: every failure becomes a response. */
  handle(request: CoreRequest): Promise<CoreResponse>;
  /** `GET /v1/account`: the caller's plan, limits, usage and what remains. */
  account(request: CoreRequest): Promise<CoreResponse>;
  /**
   * `POST /v1.0/removebg`: remove.bg's wire format over the same pipeline (same auth, limits,
   * metering and Idempotency-Key), so remove.bg's clients work with only their endpoint changed.
   */
  removeBg(request: CoreRequest): Promise<CoreResponse>;
  /** `GET /v1.0/account`: remove.bg's account document, from the account's plan and usage. */
  removeBgAccount(request: CoreRequest): Promise<CoreResponse>;
  /** `GET /v1/models`: the models this API serves (public, like the OpenAPI document). */
  models(request: CoreRequest): Promise<CoreResponse>;
  /** Prometheus text of this instance's metrics. */
  metrics(request: CoreRequest): Promise<CoreResponse>;
  /** The API's routes, for adapters to mount (`/metrics` only with `exposeMetrics`). */
  routes: Route[];
  /** `/v1/jobs` and below (undefined with `jobs: { enabled: false }`). */
  jobs: ((request: CoreRequest) => Promise<CoreResponse>) | undefined;
  /**
   * Resolves when the webhooks started so far are delivered or given up (for tests and shutdown).
   * A job's end is stored before its `job.completed` delivery starts: a job read as ended may
   * have no delivery under way yet, so a test waits for its receiver to get the event first.
   */
  webhooksIdle(): Promise<void>;
  /**
   * What the API reference of this handler says, or undefined with `apiDocs: false`. The core
   * does not serve the reference: adapters mount its routes (src/openapi) next to `routes`.
   */
  apiDocs: ApiDocsContext | undefined;
  /**
   * Resolves once the inference server answers and its model fits the preprocessing profile;
   * rejects on a mismatch, or when the server stays unreachable past `startupTimeoutMs`.
   * Call it before listening, so a misconfiguration fails at start-up.
   */
  ready(): Promise<void>;
  /**
   * `POST /v1/remove-bg` for an account the host app has already identified in-process (the
   * dashboard's "Try it", through its session): no API key is read, every plan limit applies and
   * the request counts against the account. Not a route: nothing in a request can select it.
   */
  handleForAccount(request: CoreRequest, account: Account): Promise<CoreResponse>;
  /** What `GET /v1/account` answers, for an account identified in-process (the dashboard's usage page). */
  accountSummary(account: Account): Promise<AccountSummary>;
  /**
   * Drains: new requests get 503 `service_unavailable` at once, requests in progress finish
   * (for up to `shutdownTimeoutMs`, then they are ended with a 503), then the inference
   * connection closes, and counted activity and usage still waiting for their store are written
   * (usage that Redis, being away, cannot take is lost). Call it on SIGTERM, after the HTTP
   * server stops accepting connections.
   */
  close(): Promise<void>;
}

/**
 * How one wire format's requests come in and its answers go out, over the one pipeline: bgcut's
 * own (`/v1/remove-bg`) or remove.bg's (`/v1.0/removebg`, src/core/removebg).
 */
interface Dialect {
  route: string;
  readInput?: InputReader;
  queryOptions?: boolean;
  checkResult?: (rendered: Cutout['rendered']) => void;
  /** The JSON answer the render's worker makes for this dialect (CutoutDeps.jsonAnswer). */
  jsonAnswer?: JsonAnswerRequest | null;
  answer(cutout: Cutout, order: Order, admitted: Admitted, rateHeaders: Record<string, string>): CoreResponse;
}

/** The key id logged for requests made through the dashboard's session rather than a key. */
export const DASHBOARD_KEY_ID = 'dashboard';

/**
 * The API's request path, wired: each route runs its steps (pipeline/admission, order, cutout,
 * responses) inside `respond`, which gives back whatever a request held, however it ends.
 */
export function createRemoveBgHandler(options: RemoveBgOptions): RemoveBgHandler {
  const config = resolveOptions(options);
  const client = new InferenceClient({
    address: config.inference.address,
    balancing: config.inference.balancing,
    timeoutMs: config.inference.timeoutMs,
    maxMessageBytes: config.inference.maxMessageBytes,
    retryAfterSeconds: config.inference.retryAfterSeconds,
    tls: config.inference.tls,
    sharedMemory: config.inference.sharedMemory,
    sharedMemorySlots: config.inference.sharedMemorySlots,
  });
  const verifier = new ModelVerifier(client, config.inference.models, config.inference);
  const enforcer = new PlanEnforcer({
    plans: config.plans,
    redis: config.redis,
    usageStore: options.usageStore,
    // As the host gave them (resolveOptions checked them): the enforcer warns about settings
    // that do nothing without Redis, and fills in the same defaults.
    redisFailureMode: options.redisFailureMode,
    insuranceInstances: options.insuranceInstances,
    concurrencyLeaseMs: options.concurrencyLeaseMs,
  });
  const { store: idempotencyStore, maxResultBytes, memoryMaxBytes, redisMaxBytes, ...idempotencyTimes } = config.idempotency;
  const idempotency: IdempotencyDeps = {
    store: idempotencyStore ?? (config.redis ? new RedisIdempotencyStore(config.redis, { maxBytes: redisMaxBytes }) : new MemoryIdempotencyStore({ maxBytes: memoryMaxBytes })),
    times: idempotencyTimes,
    maxResultBytes,
    onInternalError: config.onInternalError,
  };
  // Memory bounds of the image work: model inputs in flight (each a tensor plus its gRPC
  // copies), and full-size pixels being decoded, composed and encoded.
  const inferenceSlots = new Budget(config.limits.maxConcurrentInferences);
  const pixelBudget = new Budget(config.limits.maxPixelsInProcess);
  // And the model's input decodes: each holds libvips buffers of its own while it runs.
  const decodeBudget = new Budget(config.limits.maxDecodePixels);
  // The pixel loops written in JavaScript run in these worker threads, never on the host's event loop.
  const pixelPool = new PixelPool({ threads: config.pixelThreads, mainThreadGcBytes: config.mainThreadGcBytes, renderBands: config.renderBands, pngBands: config.pngBands });
  // The workers fall back to sharp on their own; say so once, here, rather than per worker.
  if (config.pngEncoder === 'napi-rs' && !fastPngEncoderAvailable()) {
    console.warn(`bgcut: @napi-rs/image did not load (${String(fastPngEncoderError())}); PNGs are encoded by sharp`);
  }
  const metrics = new ApiMetrics(() => ({
    inferenceSlots: inferenceSlots.inUse,
    inferenceQueue: inferenceSlots.queued,
    pixels: pixelBudget.inUse,
    rendersInBands: pixelPool.rendersInBands,
    rendersWhole: pixelPool.rendersWhole,
    pngsInBands: pixelPool.pngsInBands,
    pngsWhole: pixelPool.pngsWhole,
  }));
  const inFlight = new InFlight(config.limits.maxInFlight, (count) => metrics.inFlight.set(count));
  const upload = { maxFileBytes: config.limits.maxUploadBytes, maxFields: config.limits.maxFields, maxFieldBytes: config.limits.maxFieldBytes };
  const open = new Set<AbortController>();
  const respondDeps: RespondDeps = {
    enforcer,
    metrics,
    uploadTimeoutMs: config.limits.uploadTimeoutMs,
    drainCapBytes: maxBodyBytes(upload) + config.limits.maxBackgroundBytes,
    problemTypeBase: config.problemTypeBase,
    onResponse: config.onResponse,
    onInternalError: config.onInternalError,
    open,
  };

  // What an image_url refusal does not tell the caller (which address, which errno) goes to the operator.
  const imageUrl = { ...config.imageUrl, onRefusal: config.onInternalError };

  // A model a mode table names may not be among the configured ones: it runs with the profile of the request's model (same tensors, see ModelVerifier.passModel).
  const model = (name: string, profile?: PreprocessingProfile): MaskModel => client.maskModel(name, config.inference.models[name] ?? profile!);
  const cutoutDeps: CutoutDeps = {
    enforcer,
    inferenceSlots,
    pixelBudget,
    decodeBudget,
    pixelPool,
    profiles: config.inference.models,
    model,
    freeSize: (name) => client.freeSize(name),
    passModel: (requested, named) => verifier.passModel(requested, named),
    imageLimits: { maxInputPixels: config.limits.maxInputPixels },
    render: { pngCompressionLevel: config.pngCompressionLevel, pngEncoder: config.pngEncoder, foregroundEstimation: config.foregroundEstimation },
    onInternalError: config.onInternalError,
  };
  const admissionDeps = {
    keyStore: config.keyStore,
    enforcer,
    inFlight,
    inferenceSaturated: () => client.saturated(),
    retryAfterSeconds: config.inference.retryAfterSeconds,
    onIdentified: (id: Identity) => config.activity?.record(id.account.id, id.keyId === DASHBOARD_KEY_ID ? undefined : id.keyId),
  };

  // Jobs: each image through the same cutout step, its inference slots taken below synchronous requests.
  const jobService = config.jobs?.enabled === false ? undefined : createJobService(config.jobs, {
    redis: config.redis,
    imageUrl,
    maxUploadBytes: config.limits.maxUploadBytes,
    cutout: (job, n, attempt, image, signal) => cutoutImage(job, n, attempt, image, signal, {
      enforcer,
      verifier,
      models: config.inference.models,
      defaultModel: config.inference.modelName,
      maxInputPixels: config.limits.maxInputPixels,
      cutout: { ...cutoutDeps, inferenceSlots: inferenceSlots.lowPriority(), decodeBudget: decodeBudget.lowPriority() },
    }),
    routes: {
      keyStore: config.keyStore,
      admission: admissionDeps,
      enforcer,
      verifier,
      models: config.inference.models,
      defaultModel: config.inference.modelName,
      upload,
      idempotency: { store: idempotency.store, times: idempotency.times },
    },
    onInternalError: config.onInternalError,
  });
  const jobsRoute = jobService && ((request: CoreRequest) => respond(JOBS_PATH, request, respondDeps, (scope) => jobService.route(scope)));

  const bgcutDialect: Dialect = {
    route: '/v1/remove-bg',
    answer: (cutout, order, _admitted, rateHeaders) => cutoutResponse(cutout, order.output, order.upload.filename, rateHeaders),
  };

  function handle(request: CoreRequest, known?: Identity, dialect: Dialect = bgcutDialect): Promise<CoreResponse> {
    const handled = () => respond(dialect.route, request, respondDeps, async (scope) => {
      const admitted = await traceStep('bgcut.admission', () => admit(scope, admissionDeps, known));
      const idempotent = idempotentRequest(scope, admitted, idempotency);
      const order = await traceStep('bgcut.upload', () => takeOrder(scope, admitted.plan, {
        verifier,
        models: config.inference.models,
        defaultModel: config.inference.modelName,
        upload,
        background: { maxBytes: config.limits.maxBackgroundBytes, maxPixels: config.limits.maxBackgroundPixels },
        maxInputPixels: config.limits.maxInputPixels,
        metrics,
        imageUrl,
        readInput: dialect.readInput,
        queryOptions: dialect.queryOptions,
      }));
      setStepAttributes({ 'bgcut.model': order.modelName, 'bgcut.input.pixels': order.pixels });
      const replayed = await idempotent?.claim(order);
      if (replayed) return replayed;
      const cutout = await makeCutout(scope, admitted, order, dialect === bgcutDialect ? cutoutDeps : { ...cutoutDeps, checkResult: dialect.checkResult, jsonAnswer: dialect.jsonAnswer });
      for (const [stage, ms] of Object.entries(cutout.timings)) metrics.stages.observe({ stage }, ms / 1000);
      const response = dialect.answer(cutout, order, admitted, scope.rateHeaders);
      await idempotent?.complete(response);
      // The body is the adapter's alone unless an idempotency store keeps it (to replay it) or
      // the dashboard, not an adapter, takes the answer: then it is left to the collector.
      if (idempotent || known) return response;
      return { ...response, release: () => void releaseNow(response.body) };
    });
    // Spans only when the app has @opentelemetry/api and a recording SDK (src/tracing/otel.ts).
    return traceRequest('bgcut remove-bg', handled, (response, set) => set({ 'http.response.status_code': response.status }));
  }

  function account(request: CoreRequest): Promise<CoreResponse> {
    return respond('/v1/account', request, respondDeps, async (scope) => {
      if (request.method !== 'GET') throw new ApiError('method_not_allowed', { headers: { allow: 'GET' }, detail: 'Use GET.' });
      const identity = await untilAborted(authenticate(request, config.keyStore, (known) => (scope.identity = known)), scope.signal);
      const summary = await untilAborted(summaryOf(identity), scope.signal);
      scope.rateHeaders = rateLimitHeaders(summary.rate);
      return jsonResponse(200, { ...scope.rateHeaders, 'cache-control': 'no-store' }, summary);
    });
  }

  /** remove.bg's request and answer over the same steps (src/core/removebg). */
  function removeBg(request: CoreRequest): Promise<CoreResponse> {
    let mapped: RemoveBgRequest | undefined;
    const json = wantsJson(request.headers.accept);
    const dialect: Dialect = {
      route: '/v1.0/removebg',
      queryOptions: false,
      // A large JSON or urlencoded body is parsed, and its base64 decoded, in the pixel pool.
      readInput: async (...args) => {
        const upload = await readRemoveBgRequest(...args, pixelPool);
        mapped = upload.removeBg;
        return upload;
      },
      checkResult: (rendered) => {
        if (!rendered.foreground) throw new ApiError('unknown_foreground');
      },
      // remove.bg's JSON answer is made by the render's worker, beside the image (removebg/result-json.ts).
      jsonAnswer: json ? { shape: 'removebg' } : null,
      answer: (cutout, order, admitted, rateHeaders) => {
        const weight = QUALITY_QUOTA_WEIGHT[order.output.quality];
        const credits = admitted.plan.monthlyQuota ? quotaCost(admitted.plan.monthlyQuota, order.pixels, weight) : weight;
        return removeBgAnswer(cutout, { json, reportedType: mapped?.reportedType, credits, rateHeaders });
      },
    };
    // remove.bg's Accept means its own JSON answer (jsonAnswer above), not bgcut's response=json.
    const { accept: _accept, ...headers } = request.headers;
    return handle({ ...request, headers }, undefined, dialect).then(removeBgError);
  }

  async function removeBgAccountRoute(request: CoreRequest): Promise<CoreResponse> {
    const response = await respond('/v1.0/account', request, respondDeps, async (scope) => {
      if (request.method !== 'GET') throw new ApiError('method_not_allowed', { headers: { allow: 'GET' }, detail: 'Use GET.' });
      const identity = await untilAborted(authenticate(request, config.keyStore, (known) => (scope.identity = known)), scope.signal);
      const summary = await untilAborted(summaryOf(identity), scope.signal);
      scope.rateHeaders = rateLimitHeaders(summary.rate);
      return removeBgAccount(summary, scope.rateHeaders);
    });
    return removeBgError(response);
  }

  const summaryOf = (identity: Identity) =>
    accountSummary(identity, { enforcer, maxUploadBytes: config.limits.maxUploadBytes, maxInputPixels: config.limits.maxInputPixels, models: Object.keys(config.inference.models) });

  // The same for every caller: which of them a plan allows is in /v1/account.
  const modelList = listModels(config.inference.models, config.inference.modelName);
  function modelsRoute(request: CoreRequest): Promise<CoreResponse> {
    return respond('/v1/models', request, respondDeps, async () => {
      if (request.method !== 'GET') throw new ApiError('method_not_allowed', { headers: { allow: 'GET' }, detail: 'Use GET.' });
      return jsonResponse(200, { 'cache-control': 'no-cache' }, modelList);
    });
  }

  async function metricsRoute(request: CoreRequest): Promise<CoreResponse> {
    return respond('/metrics', request, respondDeps, async () => {
      if (request.method !== 'GET') throw new ApiError('method_not_allowed', { headers: { allow: 'GET' }, detail: 'Use GET.' });
      const body = Buffer.from(await metrics.registry.metrics());
      return { status: 200, headers: { 'content-type': metrics.registry.contentType, 'content-length': String(body.length) }, body };
    });
  }

  let closed: Promise<void> | undefined;
  async function close(): Promise<void> {
    const drained = await inFlight.close(config.shutdownTimeoutMs);
    if (!drained) {
      for (const controller of open) {
        controller.abort(new ApiError('service_unavailable', { detail: 'This server is shutting down.' }));
      }
      await inFlight.close(5_000);
    }
    // Jobs running get the same time to finish; what they leave is taken up by another instance (BullMQ) or lost (in process).
    await jobService?.close();
    await client.close();
    await pixelPool.close();
    // What was counted but not yet written goes now, not with the next timer tick that will never
    // come: the activity batch (the host's recorder keeps running; it is the host's to close) and
    // usage that Redis has not heard of yet.
    await Promise.all([config.activity?.flush(), enforcer.close()]);
  }

  const onlyRequest = (request: CoreRequest) => handle(request);
  return {
    handle: onlyRequest,
    handleForAccount: (request, account) => handle(request, { account, keyId: DASHBOARD_KEY_ID }),
    accountSummary: (account) => summaryOf({ account, keyId: DASHBOARD_KEY_ID }),
    account,
    removeBg,
    removeBgAccount: removeBgAccountRoute,
    models: modelsRoute,
    metrics: metricsRoute,
    routes: [
      { path: '/v1/remove-bg', handle: onlyRequest },
      { path: '/v1/account', handle: account },
      { path: '/v1/models', handle: modelsRoute },
      ...(config.removeBgApi
        ? [
            { path: '/v1.0/removebg', handle: removeBg },
            { path: '/v1.0/account', handle: removeBgAccountRoute },
          ]
        : []),
      ...(jobsRoute ? [{ path: JOBS_PATH, subpaths: true, handle: jobsRoute }] : []),
      ...(config.exposeMetrics ? [{ path: '/metrics', handle: metricsRoute }] : []),
    ],
    jobs: jobsRoute,
    webhooksIdle: async () => jobService?.webhooksIdle(),
    apiDocs: config.apiDocs ? docsContext(config) : undefined,
    ready: () => verifier.ready(),
    close: () => (closed ??= close()),
  };
}

/** What the OpenAPI document says that depends on this handler's configuration. */
function docsContext(config: ReturnType<typeof resolveOptions>): ApiDocsContext {
  return {
    serverUrl: config.publicBaseUrl,
    maxUploadBytes: config.limits.maxUploadBytes,
    models: Object.keys(config.inference.models),
    defaultModel: config.inference.modelName,
    problemTypeBase: config.problemTypeBase,
    removeBgApi: config.removeBgApi,
  };
}
