import type { Identity } from './auth/authenticate.js';
import type { PlanEnforcer, RateState } from './limits/plan-enforcer.js';
import { maxUploadBytes } from './limits/plan-policy.js';
import type { MonthlyQuota } from './limits/plans.js';
import type { Usage } from './limits/usage-meter.js';

/** What `GET /v1/account` answers, and what the dashboard's usage page shows. */
export interface AccountSummary {
  account: { id: string; status: string };
  keyId: string;
  plan: {
    name: string;
    requestsPerMinute: number;
    burst: number;
    maxConcurrent: number | null;
    maxUploadBytes: number;
    maxInputMegapixels: number;
    maxOutputMegapixels: number | null;
    monthlyQuota: MonthlyQuota | null;
    outputOptions: string[] | null;
    models: string[];
  };
  usage: Usage;
  quota: (MonthlyQuota & { used: number; remaining: number; resetsAt: string }) | null;
  rate: RateState;
  inProgress: number;
}

export interface SummaryDeps {
  enforcer: PlanEnforcer;
  maxUploadBytes: number;
  maxInputPixels: number;
  models: string[];
}

/** The account's plan, limits and standing, read without consuming anything. */
export async function accountSummary(identity: Identity, deps: SummaryDeps): Promise<AccountSummary> {
  const plan = deps.enforcer.plan(identity.account.plan);
  const standing = await deps.enforcer.standing(identity.account.id, identity.account.plan);
  return {
    account: { id: identity.account.id, status: identity.account.status },
    keyId: identity.keyId,
    plan: {
      name: identity.account.plan,
      requestsPerMinute: plan.requestsPerMinute,
      burst: plan.burst ?? 0,
      maxConcurrent: plan.maxConcurrent ?? null,
      maxUploadBytes: maxUploadBytes(plan, deps.maxUploadBytes),
      maxInputMegapixels: Math.min(deps.maxInputPixels / 1e6, plan.maxInputMegapixels ?? Infinity),
      maxOutputMegapixels: plan.maxOutputMegapixels ?? null,
      monthlyQuota: plan.monthlyQuota ?? null,
      outputOptions: plan.outputOptions ?? null,
      models: plan.models ?? deps.models,
    },
    usage: standing.usage,
    quota: standing.quota,
    rate: standing.rate,
    inProgress: standing.inProgress,
  };
}
