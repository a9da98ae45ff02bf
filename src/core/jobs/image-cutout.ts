import { Readable } from 'node:stream';
import type { Account } from '../auth/key-store.js';
import { probeImage } from '../image/pipeline.js';
import type { ModelVerifier } from '../inference/model-verifier.js';
import { checkImageSize, checkPlanOptions, checkPlanQuality, chooseModel } from '../limits/plan-policy.js';
import type { PlanEnforcer } from '../limits/plan-enforcer.js';
import { parseOutputOptions } from '../output-options.js';
import { makeCutout, type CutoutDeps } from '../pipeline/cutout.js';
import type { Order } from '../pipeline/order.js';
import { openRequestScope } from '../pipeline/request-scope.js';
import { outputFilename } from '../pipeline/responses.js';
import type { JobSpec } from './job.js';

export interface ImageCutoutDeps {
  enforcer: PlanEnforcer;
  verifier: ModelVerifier;
  models: Record<string, unknown>;
  defaultModel: string;
  maxInputPixels: number;
  /** The synchronous path's cutout deps, with inference slots taken at low priority. */
  cutout: CutoutDeps;
}

export interface ImageResult {
  body: Buffer;
  contentType: string;
  filename: string;
  width: number;
  height: number;
}

/**
 * One image of a job through the same steps as `POST /v1/remove-bg` (pipeline/cutout.ts): the
 * plan's checks, quota reserved and charged only when done, under the name `job:<id>:<n>:<try>` so an
 * image run again elsewhere (its instance died) is charged once.
 */
export async function cutoutImage(job: JobSpec, n: number, attempt: number, image: { file: Buffer; filename: string }, signal: AbortSignal, deps: ImageCutoutDeps): Promise<ImageResult> {
  const account: Account = { id: job.accountId, plan: job.plan, status: 'active' };
  const plan = deps.enforcer.plan(job.plan);
  const { options: output, requested } = parseOutputOptions(job.fields, '/v1/jobs', {});
  checkPlanOptions(plan, requested);
  checkPlanQuality(plan, output.quality);
  const modelName = chooseModel(output.model, plan, deps.models, deps.defaultModel);
  await deps.verifier.ensure(modelName);
  const probe = await probeImage(image.file, { maxInputPixels: deps.maxInputPixels });
  const pixels = probe.width * probe.height;
  const maxOutputPixels = checkImageSize(plan, pixels, output);
  const order: Order = {
    upload: { file: image.file, filename: image.filename, declaredType: '', fields: job.fields },
    // A job keeps the image itself (its result is the image, whatever `response` said).
    output: { ...output, response: 'image' },
    modelName,
    probe,
    pixels,
    maxOutputPixels,
    // Each try's charge is its own (a failed try's is refunded, and a refunded op cannot charge again).
    chargeOp: `job:${job.id}:${n}:${attempt}`,
  };
  // A scope as a request has: it gives back the slot, pixels and (on failure) the quota however the image ends.
  const scope = openRequestScope({ method: 'POST', url: '/v1/jobs', headers: {}, body: Readable.from([]), signal }, 2_147_483_647);
  scope.uploadDone();
  scope.admitted = true;
  try {
    const cutout = await makeCutout(scope, { identity: { account, keyId: 'job' }, plan }, order, deps.cutout);
    const { rendered } = cutout;
    return { body: rendered.body, contentType: rendered.contentType, filename: outputFilename(image.filename, rendered.extension), width: rendered.width, height: rendered.height };
  } finally {
    await scope.end(deps.cutout.onInternalError);
  }
}
