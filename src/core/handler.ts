import type { Readable } from 'node:stream';
import { authenticate, type Identity } from './auth/authenticate.js';
import { ApiError, problemOf } from './errors.js';
import type { CoreRequest, CoreResponse } from './http-types.js';
import { cutOut, type Cutout } from './image/pipeline.js';
import { InferenceClient, ModelMismatchError } from './inference/inference-client.js';
import { PlanLimiter, rateLimitHeaders } from './limits/plan-limiter.js';
import { maxBodyBytes, readUpload } from './multipart.js';
import { resolveOptions, type RemoveBgOptions } from './options.js';

export interface RemoveBgHandler {
  /** Answers one `POST /v1/remove-bg` request. Never rejects: every failure becomes a response. */
  handle(request: CoreRequest): Promise<CoreResponse>;
  /**
   * Resolves once the inference server answers and its model fits the preprocessing profile;
   * rejects on a mismatch, or when the server stays unreachable past `startupTimeoutMs`.
   * Call it before listening, so a misconfiguration fails at start-up.
   */
  ready(): Promise<void>;
  close(): Promise<void>;
}

/** Times ready() retries a server that is not up yet, and how long one check may take. */
const READY_RETRY_MS = 500;
const READY_CALL_MS = 5_000;

export function createRemoveBgHandler(options: RemoveBgOptions): RemoveBgHandler {
  const config = resolveOptions(options);
  const { profile } = config.inference;
  const client = new InferenceClient({
    address: config.inference.address,
    modelName: config.inference.modelName,
    timeoutMs: config.inference.timeoutMs,
    maxMessageBytes: config.inference.maxMessageBytes,
    retryAfterSeconds: config.inference.retryAfterSeconds,
  });
  const limiter = new PlanLimiter(config.plans);
  const uploadLimits = {
    maxFileBytes: config.limits.maxUploadBytes,
    maxFields: config.limits.maxFields,
    maxFieldBytes: config.limits.maxFieldBytes,
    timeoutMs: config.limits.uploadTimeoutMs,
  };
  let verified = false;

  async function ready(): Promise<void> {
    const deadline = Date.now() + config.inference.startupTimeoutMs;
    for (;;) {
      try {
        await client.verifyModel(profile, READY_CALL_MS);
        verified = true;
        return;
      } catch (error) {
        if (error instanceof ModelMismatchError || Date.now() > deadline) throw error;
        await new Promise((r) => setTimeout(r, READY_RETRY_MS));
      }
    }
  }

  /** The first request after start checks the model once, if ready() was not awaited. */
  async function ensureVerified(): Promise<void> {
    if (verified) return;
    try {
      await client.verifyModel(profile, READY_CALL_MS);
      verified = true;
    } catch (error) {
      if (error instanceof ModelMismatchError) throw error;
      throw new ApiError('inference_unavailable', {
        headers: { 'retry-after': String(config.inference.retryAfterSeconds) },
        cause: error,
      });
    }
  }

  const model = async (input: Float32Array, signal: AbortSignal) => {
    const output = await client.infer(
      { name: profile.inputName, shape: [1, 3, profile.height, profile.width], data: input },
      profile.outputName,
      signal,
    );
    return { mask: output.data, serverRunMs: output.serverRunMs };
  };

  async function handle(request: CoreRequest): Promise<CoreResponse> {
    let identity: Identity | undefined;
    let limitHeaders: Record<string, string> = {};
    try {
      if (request.method !== 'POST') throw new ApiError('method_not_allowed', { headers: { allow: 'POST' } });
      // Who, then whether they may, and only then the body: a refused request is never parsed.
      identity = await authenticate(request.headers, request.url, config.keyStore);
      limitHeaders = rateLimitHeaders(await limiter.consume(identity.account.id, identity.account.plan));
      await ensureVerified();
      const upload = await readUpload(request.body, request.headers, uploadLimits, request.signal);
      const cutout = await cutOut(
        upload.file,
        profile,
        model,
        { maxInputPixels: config.limits.maxInputPixels, pngCompressionLevel: config.pngCompressionLevel },
        request.signal,
      );
      return success(cutout, limitHeaders);
    } catch (error) {
      settleBody(request.body, maxBodyBytes(uploadLimits));
      const apiError = asApiError(error);
      return problemResponse(apiError, { ...limitHeaders, ...apiError.headers });
    }
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

  return {
    handle,
    ready,
    async close() {
      client.close();
    },
  };
}

function success(cutout: Cutout, limitHeaders: Record<string, string>): CoreResponse {
  const serverTiming = Object.entries(cutout.timings)
    .map(([stage, ms]) => `${stage};dur=${ms.toFixed(1)}`)
    .join(', ');
  return {
    status: 200,
    headers: {
      ...limitHeaders,
      'content-type': 'image/png',
      'content-length': String(cutout.png.length),
      'cache-control': 'no-store',
      'x-width': String(cutout.width),
      'x-height': String(cutout.height),
      'server-timing': serverTiming,
    },
    body: cutout.png,
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
