import type { Identity } from '../auth/authenticate.js';
import { ApiError } from '../errors.js';
import type { CoreRequest } from '../http-types.js';

/** Something a request took (a slot, pixels, a quota reservation), given back once. */
export interface Lease {
  /** Gives it back now, if not given back already. */
  release(): Promise<void>;
  /** Keeps it for good: it is not given back when the request ends (a charge that stands). */
  keep(): void;
}

/**
 * One request's life: the signal every wait honours, and everything the request took, given
 * back in one place (`end`) whatever path the request leaves by.
 */
export interface RequestScope {
  readonly request: CoreRequest;
  /**
   * Aborts when the client goes away (reason: ApiError `client_closed`), the upload takes too
   * long, counted from the request's arrival (`upload_timeout`), or a shutdown runs out of time
   * (`service_unavailable`).
   */
  readonly signal: AbortSignal;
  /** The caller, once identified (so even refusals can carry its rate-limit headers). */
  identity?: Identity;
  /** Rate-limit headers of the caller's account, once admitted. */
  rateHeaders: Record<string, string>;
  /** True once admission let the request in (key, capacity, rate and concurrency all passed). */
  admitted: boolean;
  /** Registers something taken; the scope gives it back at the end unless released or kept before. */
  hold(release: () => unknown): Lease;
  /** The upload is in: its timer stops. */
  uploadDone(): void;
  /** Gives back everything still held, newest first; failures go to `onError`. */
  end(onError: (error: unknown) => void): Promise<void>;
}

export function openRequestScope(request: CoreRequest, uploadTimeoutMs: number): RequestScope {
  const controller = new AbortController();
  // The adapter aborts without a reason when the client goes away; the server's own reasons
  // (a shutdown that ran out of time) are ApiErrors and are kept.
  const onClientGone = () => controller.abort(request.signal.reason instanceof ApiError ? request.signal.reason : new ApiError('client_closed'));
  if (request.signal.aborted) onClientGone();
  else request.signal.addEventListener('abort', onClientGone, { once: true });
  let timer: NodeJS.Timeout | undefined = setTimeout(() => controller.abort(new ApiError('upload_timeout')), uploadTimeoutMs);
  const stopTimer = () => {
    clearTimeout(timer);
    timer = undefined;
  };
  const held = new Set<() => Promise<void>>();

  return {
    request,
    signal: controller.signal,
    rateHeaders: {},
    admitted: false,
    hold(release) {
      let done = false;
      const giveBack = async () => {
        if (done) return;
        done = true;
        held.delete(giveBack);
        await release();
      };
      held.add(giveBack);
      return {
        release: giveBack,
        keep() {
          done = true;
          held.delete(giveBack);
        },
      };
    },
    uploadDone: stopTimer,
    async end(onError) {
      stopTimer();
      request.signal.removeEventListener('abort', onClientGone);
      for (const giveBack of [...held].reverse()) {
        await giveBack().catch(onError);
      }
    },
  };
}
