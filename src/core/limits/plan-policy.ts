import { ApiError } from '../errors.js';
import type { OutputOptionName, OutputOptions } from '../output-options.js';
import type { Plan } from './plans.js';

/** What a plan lets a request do: options, models, upload size and image size. One place for every such check. */

/** 403 when the request sets an output option its plan does not include. */
export function checkPlanOptions(plan: Plan, requested: readonly OutputOptionName[]): void {
  if (!plan.outputOptions) return;
  const refused = requested.find((name) => !plan.outputOptions!.includes(name));
  if (refused) throw new ApiError('option_not_in_plan', { detail: `The plan does not include the option "${refused}".` });
}

/** The model a request asked for (or the default), if it exists and the plan allows it. */
export function chooseModel(requested: string | undefined, plan: Plan, models: Record<string, unknown>, defaultModel: string): string {
  const name = requested ?? defaultModel;
  if (!Object.hasOwn(models, name)) {
    throw new ApiError('invalid_option', { detail: `model: unknown model "${name}"; models are ${Object.keys(models).join(', ')}` });
  }
  if (plan.models && !plan.models.includes(name)) {
    throw new ApiError('option_not_in_plan', { detail: `The plan does not include the model "${name}".` });
  }
  return name;
}

/** The largest upload this plan takes on this instance, in bytes. */
export function maxUploadBytes(plan: Plan, instanceMax: number): number {
  return Math.min(instanceMax, plan.maxUploadBytes ?? Infinity);
}

/**
 * Checks an image's size against the plan's input and output caps (403s), and returns the
 * largest output it may have, in pixels (Infinity for none).
 */
export function checkImageSize(plan: Plan, pixels: number, output: Pick<OutputOptions, 'size'>): number {
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
  return maxOutputPixels;
}
