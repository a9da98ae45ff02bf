import type { RedisClient } from './redis.js';
import type { ActivityRecorder } from './activity/recorder.js';
import type { IdempotencyStore } from './idempotency/store.js';
import type { KeyLookup, KeyStore } from './auth/key-store.js';
import { grpcTarget, type InferenceTls } from './inference/inference-client.js';
import { DEFAULT_PROBLEM_TYPE_BASE } from './errors.js';
import { defaultPixelThreads } from './image/pixel-pool.js';
import type { PngEncoderName } from './image/png-encoder.js';
import { ISNET_PROFILE, validateProfile, type PreprocessingProfile } from './image/profile.js';
import type { RedisFailureMode } from './limits/plan-enforcer.js';
import type { LocalUsageStore } from './limits/enforcer-options.js';
import { DEFAULT_PLANS, validatePlans, type Plans } from './limits/plans.js';
import { OUTPUT_OPTION_NAMES } from './output-options.js';
import { resolveImageUrlOptions, type ImageUrlOptions } from './image-url/options.js';
import { resolveJobsOptions, type JobsOptions } from './jobs/options.js';

/** One line per response, for access logs. Holds the key's short id, never the key. */
export interface AccessLogEntry {
  method: string;
  route: string;
  status: number;
  /** The problem code of a refusal. */
  code?: string;
  keyId?: string;
  accountId?: string;
  durationMs: number;
  bytesOut: number;
}

export interface InferenceOptions {
  /**
   * The inference server(s), ours or any Open Inference Protocol server: `host:port`, a
   * `dns:///name:port` resolving to several, or a list of `ip:port`. Calls are balanced by
   * `balancing` and UNAVAILABLE is retried on another server. Default `127.0.0.1:50051`.
   */
  address?: string | string[];
  /**
   * How calls are spread over several servers: `least-request` (the default; of two servers
   * drawn at random, the one with fewer of this instance's calls open for the model) or
   * `round-robin` (each in turn, however busy).
   */
  balancing?: 'least-request' | 'round-robin';
  /** TLS to the inference servers: the CA's PEM, plus this client's certificate and key for mTLS. */
  tls?: InferenceTls;
  /** The model used when a request names none. Default `isnet`. */
  modelName?: string;
  /** How images become that model's input, and its output a mask. Default: ISNet's. */
  profile?: PreprocessingProfile;
  /**
   * Every model a request may pick with the `model` option, by its name on the servers, with
   * its preprocessing profile. Default: just `modelName` with `profile`.
   */
  models?: Record<string, PreprocessingProfile>;
  /**
   * Run each pass on the model its mode table names (`PreprocessingProfile.modes`: ISNet's runs
   * `fast` and `balanced` on `isnet-int8`), when the servers serve that model with the same
   * tensors; a request that names a model runs every pass on it. `false` pins every pass to the
   * request's model (the default model when it names none). Default true.
   */
  modeModels?: boolean;
  /** Deadline of each inference call, in ms. Default 30 000. */
  timeoutMs?: number;
  /** Largest gRPC message sent or received, in bytes. Default 64 MiB. */
  maxMessageBytes?: number;
  /** Retry-After, in seconds, when the inference server is down or busy. Default 2. */
  retryAfterSeconds?: number;
  /** How long ready() keeps trying to reach the server and check its model, in ms. Default 120 000. */
  startupTimeoutMs?: number;
  /**
   * Tensors through shared memory (/dev/shm) instead of gRPC messages, when the API and the
   * inference server share a host: Triton's system shared memory extension, which bgcut's server
   * offers with `--allow-client-shm true` and Triton with the same flag. `auto`: used when
   * every server of `address` is on loopback and accepts it, every call over the wire whenever it
   * cannot; `off` (the default): never. docs/inference-server.md, "Shared memory".
   */
  sharedMemory?: 'auto' | 'off';
  /** With `sharedMemory: 'auto'`: most calls in flight through shared memory, each with a /dev/shm object of its own. Default 8 (1..64). */
  sharedMemorySlots?: number;
}

export interface RequestLimits {
  /** Largest image file, in bytes. Default 25 MiB. */
  maxUploadBytes?: number;
  /** Largest image, in pixels, judged from its header before decoding. Default 40 000 000. */
  maxInputPixels?: number;
  /**
   * Longest a request may take to arrive whole, from its arrival to the last byte of its upload,
   * in ms; a slower one gets 408 `upload_timeout`. Default 60 000.
   */
  uploadTimeoutMs?: number;
  /** Largest background image (`bg_image` part or `bg_image_url`), in bytes. Default 10 MiB. */
  maxBackgroundBytes?: number;
  /** Largest background image, in pixels, judged from its header before decoding. Default 25 000 000. */
  maxBackgroundPixels?: number;
  /** Form fields besides the file. Default 16. */
  maxFields?: number;
  /** Largest form field value, in bytes. Default 1024. */
  maxFieldBytes?: number;
  /**
   * Requests this API instance works on at once (uploading or processing); one more gets 503
   * `server_busy` before its upload is read, so memory stays bounded. Default 32.
   */
  maxInFlight?: number;
  /**
   * Inference calls one instance makes at once; more requests wait their turn holding only their
   * upload. Set it to the worker slots (plus queue) of the servers behind it. Default 4.
   */
  maxConcurrentInferences?: number;
  /**
   * Full-size pixels decoded, composed and encoded at once; a larger single image waits until it
   * is alone. Bounds memory under bursts of large uploads. Default 16 000 000.
   */
  maxPixelsInProcess?: number;
  /**
   * Source pixels decoded for the model at once (the model's input is made from the upload by
   * libvips, which holds about 23 MB for a 12 MP JPEG while it runs, however small the input);
   * more wait their turn, in arrival order, holding only their upload. A larger single image
   * waits until it is alone. Default 16 000 000: one 12 MP photo at a time, or sixteen 1 MP ones.
   */
  maxDecodePixels?: number;
}

export interface RemoveBgOptions {
  /** Where API keys are looked up: `new FileKeyStore({ file })` (embedded) or `new RedisKeyStore({ redis })`. */
  keyStore?: KeyStore;
  /**
   * Instead of a key store: look a key up in your own database by its SHA-256 hash (the key
   * itself never reaches this function). Resolve with the key and its account, or undefined.
   */
  resolveKey?: (hash: string) => Promise<KeyLookup | undefined>;
  /** Plans by name, each account names one (see loadPlansFile). Default: DEFAULT_PLANS. */
  plans?: Plans;
  /** Redis for limits, quotas, concurrency and usage shared by many API instances. Default: in memory. */
  redis?: RedisClient;
  /** While Redis is down: `fail-closed` (503, the default) or `insurance` (per-instance limits). */
  redisFailureMode?: RedisFailureMode;
  /** API instances sharing Redis, to size insurance limits (each gets 1/n). Default 1. */
  insuranceInstances?: number;
  /**
   * With `redis`: lease of an account's concurrency slot, renewed by its holder every third of
   * this time. A slot whose release was lost (a Redis blip, a crashed instance) is free again
   * after it; too short a lease lets a slow Redis drop live slots. Default 10 000 ms (at least 1 000).
   */
  concurrencyLeaseMs?: number;
  /**
   * Serve Prometheus metrics at `/metrics` beside the endpoint (unauthenticated: keep it off the
   * public network). Default false; `handler.metrics()` serves them anywhere else.
   */
  exposeMetrics?: boolean;
  /** Called once per response, with no key or header in it. Default: nothing. */
  onResponse?: (entry: AccessLogEntry) => void;
  /** Counts requests per account and day and notes each key's last use, for the dashboard. Default: none. */
  activity?: ActivityRecorder;
  /**
   * Without `redis`: where the month's quota and usage are kept, so they survive a restart
   * (FileDashboardStore's `usage`). Default: memory, lost on restart. Ignored with `redis`.
   */
  usageStore?: LocalUsageStore;
  /** How requests with an `Idempotency-Key` header are remembered (see docs/limits.md). */
  idempotency?: IdempotencyOptions;
  inference?: InferenceOptions;
  limits?: RequestLimits;
  /** `image_url` input: on by default, fetched with SSRF protection; see ImageUrlOptions. */
  imageUrl?: ImageUrlOptions;
  /** Asynchronous batch jobs at `/v1/jobs` (on by default, queued in this process); see JobsOptions. */
  jobs?: JobsOptions;
  /**
   * zlib level of the PNG output, 0-9: lower is faster, larger. Default 2: on the smoke photos' cutouts
   * (bench `png-settings`) about a quarter less encode CPU than level 4 for 1-8 % more bytes.
   */
  pngCompressionLevel?: number;
  /**
   * Encoder of RGBA PNG output (the default cutout): `napi-rs` (default) is @napi-rs/image's
   * fast deflate with the Paeth filter, run in the pixel workers: a quarter to a half of sharp's
   * CPU for about the same bytes, the same pixels. `sharp` encodes with libvips's zlib at
   * `pngCompressionLevel`, which also encodes grey and opaque PNGs, and every PNG when the
   * fast encoder fails to load.
   */
  pngEncoder?: PngEncoderName;
  /**
   * Worker threads for the per-pixel work written in JavaScript (full-size mask, foreground
   * colour, composition), so it never blocks the host's event loop. Default: the host's cores
   * less one, 1..4 (docs/configuration.md, "Threads").
   */
  pixelThreads?: number;
  /**
   * Most pixel workers one render is split across when they are idle: the full-size mask, the
   * foreground colour and the composition of a lone request are made in row bands, one per idle
   * worker at once, then encoded by one (image/render-bands.ts); the same bytes. Busy workers
   * (other requests' tasks running or queued) are never taken: under load each render stays one
   * task. Default 1 (off): on a GPU host it gained a lone 1 MP request ~2-5 ms for 10-20 ms more
   * API CPU per image (docs/inference-server.md, "Fifth run"). The examples read `BGCUT_RENDER_BANDS`.
   */
  renderBands?: number;
  /**
   * Most row bands one RGBA PNG (the fast encoder's, up to 4 MP) is encoded in at once while the
   * host's cores are idle: the bands are deflated on libuv's threads and joined into one stream
   * (image/png-bands.ts: the same pixels, a few bytes more per band; bands of at least 256 Ki
   * pixels, so a 1 MP cutout in up to 3). A render takes its own core and one per idle core, so
   * on a busy host the PNG is encoded whole, as before. 1..16; default 1 (off). The examples read
   * `BGCUT_PNG_BANDS`.
   */
  pngBands?: number;
  /**
   * A full garbage collection of the host's thread once this many bytes of image buffers have
   * come back to it from the pixel workers since V8's last full collection there: bounds the dead
   * Buffers a burst of large uploads leaves on that thread (V8 itself waits for 64 MB more), at
   * the cost of a full collection blocking its event loop each time, several times longer than
   * V8's own (docs/configuration.md, "Memory"). Default 0: left to V8. The examples read
   * `BGCUT_MAIN_THREAD_GC_MB`.
   */
  mainThreadGcBytes?: number;
  /**
   * Recover the object's own colour at soft edges, so no old background shows through hair or
   * fur on a new background. Default true.
   */
  foregroundEstimation?: boolean;
  /**
   * Serve the OpenAPI document at `/v1/openapi.json` and a reference page at `/docs` beside the
   * endpoint (public, no key needed). Default true.
   */
  apiDocs?: boolean;
  /**
   * Serve remove.bg's wire format beside bgcut's own: `POST /v1.0/removebg` and `GET /v1.0/account`
   * (docs/remove-bg.md), so remove.bg's clients work with only their endpoint changed. Default true.
   */
  removeBgApi?: boolean;
  /** The API's public base URL for the document's `servers`. Default: where the document was fetched from. */
  publicBaseUrl?: string;
  /** Prefix of the problem+json `type` URIs. Default `urn:bgcut:problem:`. */
  problemTypeBase?: string;
  /**
   * How long `handler.close()` lets requests in progress finish before ending them with a 503,
   * in ms. Default 30 000.
   */
  shutdownTimeoutMs?: number;
  /**
   * Called with unexpected failures (5xx), never with the API key or request headers.
   * Default: one line to stderr.
   */
  onInternalError?: (error: unknown) => void;
}

export interface IdempotencyOptions {
  /** How long a key is remembered after its request completed: retries within it are not charged again. Default 24 h. */
  keyTtlMs?: number;
  /** How long the response is kept to be answered again (bytes in Redis or memory for this long). Default 10 min. */
  resultTtlMs?: number;
  /**
   * Largest response kept, in bytes. A larger one is not stored and its key is released: a retry
   * runs (and is charged) again. Default 16 MiB.
   */
  maxResultBytes?: number;
  /** Without Redis: most bytes of responses kept in memory (least recently used dropped first). Default 256 MiB. */
  memoryMaxBytes?: number;
  /**
   * With Redis: most bytes of responses this instance keeps in Redis at once (until each one's
   * `resultTtlMs` lapses); past it an answer is not stored and its key is released. Redis holds at
   * most (API instances) x this of answers. Default 128 MiB.
   */
  redisMaxBytes?: number;
  /**
   * How long a claim lasts if its request never completes (an instance that died): retries get
   * 409 until then. Longer than the longest request (upload timeout + inference deadline).
   * Default 2 min.
   */
  inProgressTtlMs?: number;
  /** Another store (default: RedisClient with `redis`, else memory). */
  store?: IdempotencyStore;
}

export type ResolvedOptions = ReturnType<typeof resolveOptions>;

/** Fills in defaults and checks every value, so a bad option fails when the handler is created. */
export function resolveOptions(options: RemoveBgOptions) {
  const keyStore: KeyStore | undefined = options?.resolveKey ? { findByHash: options.resolveKey } : options?.keyStore;
  if (typeof keyStore?.findByHash !== 'function') {
    throw new TypeError('a keyStore (such as new FileKeyStore({ file })) or a resolveKey function is required');
  }
  if (options.keyStore && options.resolveKey) throw new TypeError('pass keyStore or resolveKey, not both');
  const inference = options.inference ?? {};
  const limits = options.limits ?? {};
  const resolved = {
    keyStore,
    plans: validatePlans(options.plans ?? DEFAULT_PLANS, OUTPUT_OPTION_NAMES),
    redis: options.redis,
    redisFailureMode: options.redisFailureMode ?? ('fail-closed' as RedisFailureMode),
    insuranceInstances: options.insuranceInstances ?? 1,
    concurrencyLeaseMs: options.concurrencyLeaseMs ?? 10_000,
    onResponse: options.onResponse,
    activity: options.activity,
    idempotency: {
      keyTtlMs: options.idempotency?.keyTtlMs ?? 86_400_000,
      resultTtlMs: options.idempotency?.resultTtlMs ?? 600_000,
      maxResultBytes: options.idempotency?.maxResultBytes ?? 16 * 1024 * 1024,
      memoryMaxBytes: options.idempotency?.memoryMaxBytes ?? 256 * 1024 * 1024,
      redisMaxBytes: options.idempotency?.redisMaxBytes ?? 128 * 1024 * 1024,
      inProgressTtlMs: options.idempotency?.inProgressTtlMs ?? 120_000,
      store: options.idempotency?.store,
    },
    exposeMetrics: options.exposeMetrics ?? false,
    apiDocs: options.apiDocs ?? true,
    removeBgApi: options.removeBgApi ?? true,
    imageUrl: resolveImageUrlOptions(options.imageUrl),
    // Checked here, so a bad value fails when the handler is created; the service keeps the objects.
    jobs: (resolveJobsOptions(options.jobs), options.jobs),
    publicBaseUrl: options.publicBaseUrl,
    inference: {
      address: inference.address ?? '127.0.0.1:50051',
      balancing: inference.balancing ?? 'least-request',
      tls: inference.tls,
      modelName: inference.modelName ?? 'isnet',
      profile: inference.profile ?? ISNET_PROFILE,
      models: inference.models ?? { [inference.modelName ?? 'isnet']: inference.profile ?? ISNET_PROFILE },
      modeModels: inference.modeModels ?? true,
      timeoutMs: inference.timeoutMs ?? 30_000,
      maxMessageBytes: inference.maxMessageBytes ?? 64 * 1024 * 1024,
      retryAfterSeconds: inference.retryAfterSeconds ?? 2,
      startupTimeoutMs: inference.startupTimeoutMs ?? 120_000,
      sharedMemory: inference.sharedMemory ?? 'off',
      sharedMemorySlots: inference.sharedMemorySlots ?? 8,
    },
    limits: {
      maxUploadBytes: limits.maxUploadBytes ?? 25 * 1024 * 1024,
      maxInputPixels: limits.maxInputPixels ?? 40_000_000,
      uploadTimeoutMs: limits.uploadTimeoutMs ?? 60_000,
      maxBackgroundBytes: limits.maxBackgroundBytes ?? 10 * 1024 * 1024,
      maxBackgroundPixels: limits.maxBackgroundPixels ?? 25_000_000,
      maxFields: limits.maxFields ?? 16,
      maxFieldBytes: limits.maxFieldBytes ?? 1024,
      maxInFlight: limits.maxInFlight ?? 32,
      maxConcurrentInferences: limits.maxConcurrentInferences ?? 4,
      maxPixelsInProcess: limits.maxPixelsInProcess ?? 16_000_000,
      maxDecodePixels: limits.maxDecodePixels ?? 16_000_000,
    },
    pngCompressionLevel: options.pngCompressionLevel ?? 2,
    pngEncoder: options.pngEncoder ?? 'napi-rs',
    pixelThreads: options.pixelThreads ?? defaultPixelThreads(),
    mainThreadGcBytes: options.mainThreadGcBytes ?? 0,
    renderBands: options.renderBands ?? 1,
    pngBands: options.pngBands ?? 1,
    foregroundEstimation: options.foregroundEstimation ?? true,
    problemTypeBase: options.problemTypeBase ?? DEFAULT_PROBLEM_TYPE_BASE,
    shutdownTimeoutMs: options.shutdownTimeoutMs ?? 30_000,
    onInternalError: options.onInternalError ?? ((error: unknown) => console.error('bgcut: internal error:', error)),
  };

  const positive = (name: string, value: number) => {
    if (!Number.isInteger(value) || value <= 0) throw new RangeError(`${name} must be a positive integer, got ${value}`);
  };
  for (const [name, value] of Object.entries(resolved.limits)) positive(`limits.${name}`, value);
  for (const name of ['timeoutMs', 'maxMessageBytes', 'retryAfterSeconds', 'startupTimeoutMs'] as const) {
    positive(`inference.${name}`, resolved.inference[name]);
  }
  const target = grpcTarget(resolved.inference.address);
  if (!/^(dns:|unix:|ipv4:|ipv6:)/.test(target) && !/^[^\s/]+:\d+$/.test(target)) {
    throw new RangeError(`inference.address must be host:port, dns:///name:port or a list of ip:port, got "${target}"`);
  }
  if (!['auto', 'off'].includes(resolved.inference.sharedMemory)) {
    throw new RangeError(`inference.sharedMemory must be auto or off, got "${String(resolved.inference.sharedMemory)}"`);
  }
  if (!Number.isInteger(resolved.inference.sharedMemorySlots) || resolved.inference.sharedMemorySlots < 1 || resolved.inference.sharedMemorySlots > 64) {
    throw new RangeError('inference.sharedMemorySlots must be an integer in 1..64');
  }
  if (!['least-request', 'round-robin'].includes(resolved.inference.balancing)) {
    throw new RangeError(`inference.balancing must be least-request or round-robin, got "${String(resolved.inference.balancing)}"`);
  }
  for (const profile of Object.values(resolved.inference.models)) validateProfile(profile);
  if (!Object.hasOwn(resolved.inference.models, resolved.inference.modelName)) {
    throw new RangeError(`inference.models must include the default model "${resolved.inference.modelName}"`);
  }
  if (!Number.isInteger(resolved.pixelThreads) || resolved.pixelThreads < 1 || resolved.pixelThreads > 256) {
    throw new RangeError('pixelThreads must be an integer in 1..256');
  }
  if (!Number.isInteger(resolved.renderBands) || resolved.renderBands < 1 || resolved.renderBands > 256) {
    throw new RangeError('renderBands must be an integer in 1..256 (1: off)');
  }
  if (!Number.isInteger(resolved.pngBands) || resolved.pngBands < 1 || resolved.pngBands > 16) {
    throw new RangeError('pngBands must be an integer in 1..16 (1: off)');
  }
  if (!Number.isInteger(resolved.mainThreadGcBytes) || resolved.mainThreadGcBytes < 0) {
    throw new RangeError('mainThreadGcBytes must be an integer >= 0 (0: off)');
  }
  if (!Number.isInteger(resolved.pngCompressionLevel) || resolved.pngCompressionLevel < 0 || resolved.pngCompressionLevel > 9) {
    throw new RangeError('pngCompressionLevel must be 0..9');
  }
  if (resolved.pngEncoder !== 'napi-rs' && resolved.pngEncoder !== 'sharp') {
    throw new RangeError(`pngEncoder must be "napi-rs" or "sharp", got "${String(resolved.pngEncoder)}"`);
  }
  if (resolved.redisFailureMode !== 'fail-closed' && resolved.redisFailureMode !== 'insurance') {
    throw new RangeError('redisFailureMode must be "fail-closed" or "insurance"');
  }
  positive('insuranceInstances', resolved.insuranceInstances);
  if (!Number.isInteger(resolved.concurrencyLeaseMs) || resolved.concurrencyLeaseMs < 1000) {
    throw new RangeError('concurrencyLeaseMs must be an integer of at least 1000 (ms)');
  }
  positive('shutdownTimeoutMs', resolved.shutdownTimeoutMs);
  for (const name of ['keyTtlMs', 'resultTtlMs', 'maxResultBytes', 'memoryMaxBytes', 'redisMaxBytes', 'inProgressTtlMs'] as const) {
    positive(`idempotency.${name}`, resolved.idempotency[name]);
  }
  if (resolved.idempotency.resultTtlMs > resolved.idempotency.keyTtlMs) throw new RangeError('idempotency.resultTtlMs must be at most idempotency.keyTtlMs');
  // The image must fit in one gRPC message of the largest model's input size.
  const inputBytes = Math.max(...Object.values(resolved.inference.models).map((p) => 3 * p.width * p.height * 4));
  if (inputBytes + 1024 > resolved.inference.maxMessageBytes) {
    throw new RangeError(`inference.maxMessageBytes (${resolved.inference.maxMessageBytes}) is below the model input size (${inputBytes} bytes)`);
  }
  return resolved;
}
