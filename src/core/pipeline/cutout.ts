import { FORMATS, keepOnlyWhatRenderNeeds, renderOutput, type Rendered } from '../image/output.js';
import { planFor, QUALITY_QUOTA_WEIGHT, renderSettingsFor, segmentAtQuality, slotsFor, type PassModels } from '../image/multi-pass.js';
import type { ImageLimits, MaskModel, Segmentation } from '../image/pipeline.js';
import type { PixelPool } from '../image/pixel-pool.js';
import type { PngEncoderName } from '../image/png-encoder.js';
import type { ModePlan, PreprocessingProfile } from '../image/profile.js';
import type { Budget } from '../limits/budget.js';
import type { PlanEnforcer } from '../limits/plan-enforcer.js';
import type { Admitted } from './admission.js';
import { untilAborted } from '../../util/abortable.js';
import type { Order } from './order.js';
import type { RequestScope } from './request-scope.js';
import { traceStep } from '../../tracing/otel.js';
import type { JsonAnswerRequest } from './json-answer.js';
import { outputFilename } from './responses.js';

export interface CutoutDeps {
  enforcer: PlanEnforcer;
  /** Model inputs in flight on this instance (each a tensor plus its gRPC copies); jobs take them at low priority. */
  inferenceSlots: Pick<Budget, 'take'>;
  /** Full-size pixels decoded, composed and encoded at once on this instance. */
  pixelBudget: Budget;
  /** Source pixels being decoded for the model at once on this instance (image/pipeline.ts's DecodeGate). */
  decodeBudget: Pick<Budget, 'take'>;
  /** The worker threads that run the pixel loops (image/pixel-pool.ts). */
  pixelPool: PixelPool;
  profiles: Record<string, PreprocessingProfile>;
  /** The model by name, as a function from input tensor to mask; `profile` for a model not configured (one a mode table names). */
  model: (name: string, profile?: PreprocessingProfile) => MaskModel;
  /** Whether the served model takes any input size (its metadata says so): then each quality runs at its profile's size. */
  freeSize: (name: string) => boolean;
  /** The served model a pass runs on, given the request's model and the one the mode table names (ModelVerifier.passModel). */
  passModel: (requested: string, named: string | undefined) => Promise<string>;
  imageLimits: ImageLimits;
  render: { pngCompressionLevel: number; pngEncoder: PngEncoderName; foregroundEstimation: boolean };
  onInternalError: (error: unknown) => void;
  /** A last check of the result before it is charged (remove.bg's 400 `unknown_foreground`): a throw refunds the quota. */
  checkResult?: ((rendered: Rendered) => void) | undefined;
  /**
   * The JSON answer a dialect makes in place of `response=json`'s (remove.bg's, json-answer.ts),
   * or null for the image alone; undefined: as the order's `response` says.
   */
  jsonAnswer?: JsonAnswerRequest | null | undefined;
}

export interface Cutout {
  rendered: Rendered;
  /** How sure the model was of this cutout, 0..1 (see image/confidence.ts). */
  confidence: number;
  /** Milliseconds per stage: the segmentation's, then the rendering's. */
  timings: Record<string, number>;
}

/**
 * Step 3: the work. Reserves the quota (given back if the cutout does not reach its client),
 * waits for an inference slot, runs the model, waits for pixel budget, composes and encodes.
 */
export async function makeCutout(scope: RequestScope, admitted: Admitted, order: Order, deps: CutoutDeps): Promise<Cutout> {
  const { signal } = scope;
  const account = admitted.identity.account;
  // One moment for the quota charge and the usage record: a cutout admitted in the last instant
  // of a month and delivered in the next counts in the month it was charged in, both times.
  const chargedAt = new Date();
  const refund = await untilAborted(deps.enforcer.reserveQuota(account.id, account.plan, order.pixels, chargedAt, QUALITY_QUOTA_WEIGHT[order.output.quality], order.chargeOp && `${order.chargeOp}:quota`), signal, (late) => late());
  const quota = scope.hold(refund);

  const slot = scope.hold(await deps.inferenceSlots.take(slotsFor(order.output.quality), signal));
  // The mask alone of an opaque image needs no full-size decode at all: only the model's input
  // is decoded (an image with alpha is decoded for its own alpha, folded into the mask).
  const needsFullDecode = order.output.channels !== 'alpha' || order.probe.hasAlpha;
  // With memory for the full size now, a small JPEG is decoded once for the model and the output.
  const early = deps.pixelBudget.tryTake(order.pixels);
  let pixels = early ? scope.hold(early) : undefined;
  let segmentation: Segmentation;
  try {
    // A client that left while this request waited for its slot never starts an inference.
    signal.throwIfAborted();
    const profile = deps.profiles[order.modelName]!;
    const plan = planFor(profile, order.output.quality, deps.freeSize(order.modelName));
    const models = await passModels(order, plan, deps);
    const segment = () =>
      segmentAtQuality(
        order.output.quality,
        order.upload.file,
        order.probe,
        profile,
        models,
        deps.imageLimits,
        signal,
        deps.pixelPool,
        Boolean(pixels) && needsFullDecode,
        plan,
        (units, abort) => deps.decodeBudget.take(units, abort),
        order.ownUpload === true,
      );
    // The model call is a span of its own (inference-client.ts); decoding comes first in segment().
    segmentation = await traceStep('bgcut.segment', segment, {
      // The decode the request waited for: one made beside the model call overlaps that span instead.
      past: (seg, start) => [{ name: 'bgcut.decode', start, end: start + (seg.timings.decode ?? 0) - (seg.decodedBesideMs ?? 0), attributes: stageAttributes(seg.timings) }],
    });
  } finally {
    await slot.release();
  }
  const render = { ...renderSettingsFor(order.output.quality, deps.render), maxOutputPixels: order.maxOutputPixels };
  if (!pixels) {
    // A request that waits for memory holds only its upload and small views meanwhile.
    await keepOnlyWhatRenderNeeds(segmentation, order.output, render, deps.pixelPool);
    pixels = scope.hold(await deps.pixelBudget.take(order.pixels, signal));
  }
  // Encoding is the last step of renderOutput; the full-size work runs in the pixel pool.
  // The JSON answer is made in the render's worker, beside the image (json-answer.ts).
  const json =
    deps.jsonAnswer !== undefined
      ? (deps.jsonAnswer ?? undefined)
      : order.output.response === 'json'
        ? { filename: outputFilename(order.upload.filename, FORMATS[order.output.format].extension) }
        : undefined;
  const rendered = await traceStep('bgcut.render', () => renderOutput(segmentation, order.output, render, deps.pixelPool, json, order.hints, order.background, true), {
    attributes: { 'bgcut.output.format': order.output.format },
    past: (out, _start, end) => [{ name: 'bgcut.encode', start: end - out.timings.encode, end, attributes: { 'bgcut.output.bytes': out.bodyBytes ?? out.body.length } }],
  });
  await pixels.release();
  deps.checkResult?.(rendered);

  // Charged for good only if the client is still there to get the cutout.
  signal.throwIfAborted();
  quota.keep();
  await deps.enforcer.recordUsage(account.id, order.pixels, chargedAt, order.chargeOp && `${order.chargeOp}:usage`).catch(deps.onInternalError);
  return { rendered, confidence: segmentation.confidence, timings: stageTimings(segmentation, rendered) };
}

/**
 * The models the passes run on: the mode table's (plan.model for the whole image, plan.cropModel
 * for `best`'s crops) where the servers serve them, unless the request named its model, which
 * then runs every pass.
 */
async function passModels(order: Order, plan: ModePlan | undefined, deps: CutoutDeps): Promise<PassModels> {
  const requested = order.modelName;
  if (order.output.model !== undefined || !plan) return { whole: deps.model(requested), crop: deps.model(requested) };
  const [whole, crop] = await Promise.all([deps.passModel(requested, plan.model), deps.passModel(requested, plan.cropModel ?? plan.model)]);
  const profile = deps.profiles[requested]!;
  return { whole: deps.model(whole, profile), crop: deps.model(crop, profile) };
}

/** Milliseconds per stage, as span attributes. */
function stageAttributes(timings: Segmentation['timings']): Record<string, number> {
  return Object.fromEntries(Object.entries(timings).map(([stage, ms]) => [`bgcut.stage.${stage}_ms`, Math.round((ms ?? 0) * 10) / 10]));
}

function stageTimings(segmentation: Segmentation, rendered: Rendered): Record<string, number> {
  const timings: Record<string, number> = {};
  for (const [stage, ms] of Object.entries(segmentation.timings)) timings[stage] = ms ?? 0;
  timings.decode = (timings.decode ?? 0) + rendered.timings.decode;
  timings.postprocess = (timings.postprocess ?? 0) + rendered.timings.postprocess;
  timings.encode = rendered.timings.encode;
  return timings;
}
