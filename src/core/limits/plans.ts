import { readFileSync } from 'node:fs';

export interface MonthlyQuota {
  /** `images`: each cutout costs 1. `megapixels`: each costs its size rounded up to whole MP (at least 1). */
  unit: 'images' | 'megapixels';
  amount: number;
}

export interface Plan {
  /** Sustained requests per minute. */
  requestsPerMinute: number;
  /** Extra requests allowed once the minute's allowance is used, refilled over an hour. Default 0. */
  burst?: number;
  /** Cutouts per calendar month (UTC); absent for no quota. */
  monthlyQuota?: MonthlyQuota;
  /** Requests of one account in progress at once. Default: no limit. */
  maxConcurrent?: number;
  /** Largest upload, in bytes; at most the handler's own limit. Default: the handler's. */
  maxUploadBytes?: number;
  /** Largest input image, in megapixels; at most the handler's own limit. Default: the handler's. */
  maxInputMegapixels?: number;
  /** Largest output, in megapixels: `size=auto` scales down to it, `size=full` above it is refused. */
  maxOutputMegapixels?: number;
  /** Models the plan may pick with the `model` option; absent for all. */
  models?: string[];
  /** Output options the plan may use (see the README); absent for all. */
  outputOptions?: string[];
  /** Values of the `quality` option the plan may use; absent for all. */
  qualities?: string[];
  /** Most images in one job (`POST /v1/jobs`). Default 100. */
  maxBatchImages?: number;
  /** How long a job's results are kept after it finishes, in hours. Default 24. */
  jobRetentionHours?: number;
}

/** A plan's batch settings, with their defaults. */
export function jobLimitsOf(plan: Plan): { maxBatchImages: number; retentionMs: number } {
  return { maxBatchImages: plan.maxBatchImages ?? 100, retentionMs: (plan.jobRetentionHours ?? 24) * 3_600_000 };
}

export type Plans = Record<string, Plan>;

/** Plans used when the handler is given none. */
export const DEFAULT_PLANS: Plans = {
  free: { requestsPerMinute: 10, burst: 5, monthlyQuota: { unit: 'images', amount: 50 }, maxConcurrent: 1, maxInputMegapixels: 12, maxBatchImages: 10, jobRetentionHours: 24 },
  pro: { requestsPerMinute: 120, burst: 60, monthlyQuota: { unit: 'megapixels', amount: 20_000 }, maxConcurrent: 8, maxBatchImages: 500, jobRetentionHours: 72 },
};

const PLAN_KEYS = new Set([
  'requestsPerMinute',
  'burst',
  'monthlyQuota',
  'maxConcurrent',
  'maxUploadBytes',
  'maxInputMegapixels',
  'maxOutputMegapixels',
  'outputOptions',
  'models',
  'qualities',
  'maxBatchImages',
  'jobRetentionHours',
]);

/** Checks a plan table, naming the first wrong value; returns it unchanged. */
export function validatePlans(plans: unknown, knownOutputOptions?: readonly string[]): Plans {
  if (!plans || typeof plans !== 'object' || Array.isArray(plans)) throw new RangeError('plans must be an object of named plans');
  const entries = Object.entries(plans as Record<string, unknown>);
  if (entries.length === 0) throw new RangeError('plans must name at least one plan');
  for (const [name, value] of entries) {
    const where = `plans.${name}`;
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(name)) throw new RangeError(`${where}: plan names are 1-64 of [A-Za-z0-9_-]`);
    if (!value || typeof value !== 'object') throw new RangeError(`${where} must be an object`);
    const plan = value as Record<string, unknown>;
    for (const key of Object.keys(plan)) if (!PLAN_KEYS.has(key)) throw new RangeError(`${where}.${key} is not a plan setting`);
    const positiveInt = (key: string, required = false) => {
      const v = plan[key];
      if (v === undefined && !required) return;
      if (!Number.isInteger(v) || (v as number) <= 0) throw new RangeError(`${where}.${key} must be a positive integer`);
    };
    positiveInt('requestsPerMinute', true);
    positiveInt('maxConcurrent');
    positiveInt('maxUploadBytes');
    positiveInt('maxBatchImages');
    if (plan.jobRetentionHours !== undefined && !((plan.jobRetentionHours as number) > 0)) throw new RangeError(`${where}.jobRetentionHours must be > 0`);
    if (plan.burst !== undefined && (!Number.isInteger(plan.burst) || (plan.burst as number) < 0)) {
      throw new RangeError(`${where}.burst must be an integer >= 0`);
    }
    for (const key of ['maxInputMegapixels', 'maxOutputMegapixels']) {
      if (plan[key] !== undefined && !((plan[key] as number) > 0)) throw new RangeError(`${where}.${key} must be > 0`);
    }
    if (plan.monthlyQuota !== undefined) {
      const quota = plan.monthlyQuota as Record<string, unknown>;
      if (!quota || (quota.unit !== 'images' && quota.unit !== 'megapixels')) {
        throw new RangeError(`${where}.monthlyQuota.unit must be "images" or "megapixels"`);
      }
      if (!Number.isInteger(quota.amount) || (quota.amount as number) <= 0) {
        throw new RangeError(`${where}.monthlyQuota.amount must be a positive integer`);
      }
    }
    if (plan.models !== undefined && (!Array.isArray(plan.models) || plan.models.some((m) => typeof m !== 'string'))) {
      throw new RangeError(`${where}.models must be a list of model names`);
    }
    if (plan.qualities !== undefined) {
      const known = ['fast', 'balanced', 'best'];
      if (!Array.isArray(plan.qualities) || plan.qualities.some((q) => !known.includes(q as string))) {
        throw new RangeError(`${where}.qualities must be a list of ${known.join(', ')}`);
      }
      // Requests that name no quality get balanced: a plan without it would refuse them all.
      if (!plan.qualities.includes('balanced')) throw new RangeError(`${where}.qualities must include "balanced" (the default)`);
    }
    if (plan.outputOptions !== undefined) {
      if (!Array.isArray(plan.outputOptions) || plan.outputOptions.some((o) => typeof o !== 'string')) {
        throw new RangeError(`${where}.outputOptions must be a list of option names`);
      }
      const unknown = knownOutputOptions && plan.outputOptions.find((o: string) => !knownOutputOptions.includes(o));
      if (unknown) throw new RangeError(`${where}.outputOptions: unknown option "${unknown}"`);
    }
  }
  return plans as Plans;
}

/**
 * Reads a plans file: JSON of the form `{ "plans": { "<name>": { ...Plan } } }`.
 * Throws, naming the file and the value, when it is not valid.
 */
export function loadPlansFile(file: string, knownOutputOptions?: readonly string[]): Plans {
  let data: unknown;
  try {
    data = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new Error(`cannot read plans file ${file}: ${(error as Error).message}`);
  }
  try {
    return validatePlans((data as { plans?: unknown })?.plans, knownOutputOptions);
  } catch (error) {
    throw new RangeError(`${file}: ${(error as Error).message}`);
  }
}

/** Cost of one cutout against a monthly quota; `weight` multiplies it (a `quality=best` cutout weighs its model passes). */
export function quotaCost(quota: MonthlyQuota, pixels: number, weight = 1): number {
  return weight * (quota.unit === 'images' ? 1 : Math.max(1, Math.ceil(pixels / 1e6)));
}
