import { createHash, randomUUID } from 'node:crypto';
import { ApiError } from '../errors.js';
import type { CoreResponse } from '../http-types.js';
import type { IdempotencyStore, IdempotencyTimes, StoredResponse } from '../idempotency/store.js';
import type { Admitted } from './admission.js';
import { untilAborted } from '../../util/abortable.js';
import type { Order } from './order.js';
import type { RequestScope } from './request-scope.js';

export interface IdempotencyDeps {
  store: IdempotencyStore;
  times: IdempotencyTimes;
  /** Largest response kept to answer retries, in bytes; a larger one is charged once but not replayed. */
  maxResultBytes: number;
  onInternalError: (error: unknown) => void;
}

/** Stripe's limits: up to 255 characters; here visible ASCII only, so it is safe in a log line and a Redis key. */
const KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

/** Headers of the first answer that describe the account's standing now, not then: a replay carries the current ones. */
const STANDING_HEADERS = /^(ratelimit|ratelimit-policy|x-ratelimit-.*|retry-after)$/;

export interface IdempotentRequest {
  /**
   * Step 2b, once the order is read: claims the key for this request's fingerprint. Resolves with
   * the stored answer to replay (a retry of a completed request), or with undefined when this
   * request is the one to run; then `complete` must be given its response. 409 while another
   * request with the key runs, 422 when the key was used for a different request.
   */
  claim(order: Order): Promise<CoreResponse | undefined>;
  /** Keeps the response for retries of this key (the request was charged). */
  complete(response: CoreResponse): Promise<void>;
}

/**
 * Step 1b: the `Idempotency-Key` header (Stripe's convention), read before the body so a malformed
 * one is refused unread. Undefined when the request has none: nothing is stored then. Keys are
 * per account: two accounts may use the same key.
 */
export function idempotentRequest(scope: RequestScope, admitted: Admitted, deps: IdempotencyDeps): IdempotentRequest | undefined {
  const header = scope.request.headers['idempotency-key'];
  if (header === undefined) return undefined;
  if (typeof header !== 'string' || !KEY_PATTERN.test(header)) {
    throw new ApiError('invalid_idempotency_key', { detail: 'Idempotency-Key must be one header of 1 to 255 visible ASCII characters (a UUID is a good key).' });
  }
  const key = `${admitted.identity.account.id}:${header}`;
  const token = randomUUID();
  let claimed: { release(): Promise<void>; keep(): void } | undefined;

  return {
    async claim(order) {
      const fingerprint = fingerprintOf(scope.request.url, order);
      const found = await untilAborted(
        deps.store.claim(key, fingerprint, token, deps.times).catch((error: unknown) => {
          throw new ApiError('service_unavailable', { detail: 'The idempotency store cannot be reached.', headers: { 'retry-after': '5' }, cause: error });
        }),
        scope.signal,
        // Claimed after the client left: given up, so its retry is not told "in progress".
        (late) => late.state === 'claimed' && deps.store.abandon(key, token),
      );
      if (found.state !== 'claimed' && found.fingerprint !== fingerprint) {
        throw new ApiError('idempotency_key_reused', { detail: 'This Idempotency-Key was used for a different request (another image, other options or another path) in the last 24 hours.' });
      }
      if (found.state === 'in-progress') throw new ApiError('idempotency_key_in_use', { headers: { 'retry-after': '2' } });
      if (found.state === 'done') {
        if (!found.result) throw new ApiError('idempotency_result_gone');
        return replay(found.result, scope.rateHeaders);
      }
      // Until the request completes, the claim is given up whatever way it fails (nothing was charged).
      claimed = scope.hold(() => deps.store.abandon(key, token));
      return undefined;
    },
    async complete(response) {
      if (!claimed) return;
      // Charged: the claim stays even if writing the result fails (retries get 409 until it lapses, never a second charge).
      claimed.keep();
      // Too large to keep: not stored, and the key is released (a retry runs, and is charged, again)
      // rather than held 24 h for an answer that cannot be given.
      if (response.body.length > deps.maxResultBytes) {
        await deps.store.abandon(key, token).catch(deps.onInternalError);
        return;
      }
      const kept: StoredResponse = { status: response.status, headers: Object.fromEntries(Object.entries(response.headers).filter(([name]) => !STANDING_HEADERS.test(name))), body: response.body };
      await deps.store.complete(key, token, kept, deps.times).catch(deps.onInternalError);
    },
  };
}

function replay(result: StoredResponse, rateHeaders: Record<string, string>): CoreResponse {
  return { status: result.status, headers: { ...result.headers, ...rateHeaders, 'idempotent-replayed': 'true' }, body: result.body };
}

/** What makes two requests the same: path and query, form fields, file name and the image's bytes (not the multipart framing, which differs per send). */
function fingerprintOf(url: string, order: Order): string {
  const hash = createHash('sha256');
  const part = (value: string) => hash.update(`${Buffer.byteLength(value)}:${value}`);
  part(url);
  part(order.upload.filename);
  // Names in code-unit order (sort()'s default), so the order the form sent them in does not matter.
  for (const name of Object.keys(order.upload.fields).sort()) {
    part(name);
    part(order.upload.fields[name]!);
  }
  hash.update(createHash('sha256').update(order.upload.file).digest());
  // The other file parts (a `bg_image` photo, `hints`): another photo or other hints is another request.
  const parts = order.upload.parts ?? {};
  for (const name of Object.keys(parts).sort()) {
    part(name);
    hash.update(createHash('sha256').update(parts[name]!.file).digest());
  }
  return hash.digest('hex');
}
