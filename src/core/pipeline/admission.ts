import { authenticate, type Identity } from '../auth/authenticate.js';
import type { KeyStore } from '../auth/key-store.js';
import { ApiError } from '../errors.js';
import type { InFlight } from '../limits/in-flight.js';
import type { PlanEnforcer } from '../limits/plan-enforcer.js';
import type { Plan } from '../limits/plans.js';
import { untilAborted } from '../../util/abortable.js';
import type { RequestScope } from './request-scope.js';

export interface AdmissionDeps {
  keyStore: KeyStore;
  enforcer: PlanEnforcer;
  inFlight: InFlight;
  /** True for a moment after every inference server said it was full. */
  inferenceSaturated: () => boolean;
  retryAfterSeconds: number;
  /** Told of every identified request (per-day counts, last use of keys). */
  onIdentified?: ((identity: Identity) => void) | undefined;
}

export interface Admitted {
  identity: Identity;
  plan: Plan;
}

/**
 * Step 1: who is calling and whether they may start now, before a byte of the body is read:
 * method, key (401/403), this instance's capacity (503), the account's rate and concurrency
 * (429). What it takes (an in-flight place, an account slot) is held by the scope.
 */
export async function admit(scope: RequestScope, deps: AdmissionDeps, known?: Identity): Promise<Admitted> {
  const { request, signal } = scope;
  if (request.method !== 'POST') throw new ApiError('method_not_allowed', { headers: { allow: 'POST' } });
  // `known`: an account the host already identified in-process (the dashboard's session), never
  // anything read from the request; it passes the same account checks as a key would.
  const identity = known ? identifiedAccount(scope, known) : await untilAborted(
    authenticate(request, deps.keyStore, (found) => (scope.identity = found)),
    signal,
  );
  deps.onIdentified?.(identity);
  const plan = deps.enforcer.plan(identity.account.plan);

  const retryAfter = { 'retry-after': String(deps.retryAfterSeconds) };
  const place = deps.inFlight.tryReserve();
  if (!place) {
    if (deps.inFlight.closing) throw new ApiError('service_unavailable', { headers: retryAfter, detail: 'This server is shutting down. Retry after the time in Retry-After.' });
    throw new ApiError('server_busy', { headers: retryAfter });
  }
  scope.hold(place);
  if (deps.inferenceSaturated()) {
    throw new ApiError('inference_unavailable', { headers: retryAfter, detail: 'Every inference server is busy. Retry after the time in Retry-After.' });
  }
  const admission = await untilAborted(
    deps.enforcer.admit(identity.account.id, identity.account.plan, { signal }),
    signal,
    (late) => late.release(),
  );
  scope.hold(admission.release);
  scope.rateHeaders = admission.headers;
  scope.admitted = true;
  return { identity, plan };
}

function identifiedAccount(scope: RequestScope, identity: Identity): Identity {
  scope.identity = identity;
  if (identity.account.status !== 'active') throw new ApiError('account_suspended');
  return identity;
}
