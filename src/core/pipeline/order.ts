import type { ApiMetrics } from '../metrics.js';
import { HINTS_FIELD, probeHints } from '../image/hints.js';
import { probeImage, type Probe } from '../image/pipeline.js';
import type { ModelVerifier } from '../inference/model-verifier.js';
import { checkImageSize, checkPlanOptions, checkPlanQuality, chooseModel, maxUploadBytes } from '../limits/plan-policy.js';
import type { Plan } from '../limits/plans.js';
import type { CoreRequest } from '../http-types.js';
import type { Upload, UploadLimits } from '../multipart.js';
import { readImageInput } from '../image-url/read-input.js';
import type { ResolvedImageUrlOptions } from '../image-url/options.js';
import { parseOutputOptions, type OutputOptions } from '../output-options.js';
import { untilAborted } from '../../util/abortable.js';
import type { RequestScope } from './request-scope.js';
import { ApiError } from '../errors.js';
import { SIZE_PIXELS } from '../image/output.js';
import { BACKGROUND_PART } from '../image/backdrop.js';
import { readBackgroundImage, type BackgroundLimits } from './background-image.js';
import { releaseUpload } from '../upload-bytes.js';

export interface OrderDeps {
  verifier: ModelVerifier;
  models: Record<string, unknown>;
  defaultModel: string;
  /** Upload limits of this instance; the plan may lower the file size. */
  upload: UploadLimits;
  /** Limits of the background image (`bg_image` / `bg_image_url`). */
  background: BackgroundLimits;
  maxInputPixels: number;
  metrics: ApiMetrics;
  /** `onRefusal` hears the specifics of an image_url refusal, which the caller is not told. */
  imageUrl: ResolvedImageUrlOptions & { onRefusal?: ((refusal: Error) => void) | undefined };
  /**
   * Reads the image and the option fields (by bgcut's names) of another wire format (remove.bg's,
   * src/core/removebg); default: bgcut's own (multipart `file`, or `image_url`).
   */
  readInput?: InputReader | undefined;
  /** Whether options may also come in the query string (bgcut's own requests). Default true. */
  queryOptions?: boolean | undefined;
}

export type InputReader = (
  request: CoreRequest,
  limits: InputLimits,
  imageUrl: OrderDeps['imageUrl'],
  signal: AbortSignal,
) => Promise<Upload>;

/**
 * `output_size` is exact, so it is refused, not shrunk, when `size` (400) or the plan (403)
 * caps the output below it.
 */
function checkOutputSize(output: OutputOptions, maxOutputPixels: number): void {
  if (!output.outputSize) return;
  const { width, height } = output.outputSize;
  const pixels = width * height;
  if (pixels > SIZE_PIXELS[output.size]) throw new ApiError('invalid_option', { detail: `output_size: ${width}x${height} is more than size=${output.size} allows (${SIZE_PIXELS[output.size] / 1e6} MP)` });
  if (pixels > maxOutputPixels) throw new ApiError('option_not_in_plan', { detail: `output_size: ${width}x${height} is more than the plan's ${maxOutputPixels / 1e6} MP of output` });
}

/** The upload's limits, and the byte limit of the optional background part. */
export type InputLimits = UploadLimits & { maxBackgroundBytes: number };

const readBgcutInput: InputReader = (request, limits, imageUrl, signal) => readImageInput(request.body, request.headers, limits, imageUrl, signal);

/** What the caller asked for, checked against its plan. */
export interface Order {
  upload: Upload;
  output: OutputOptions;
  modelName: string;
  probe: Probe;
  pixels: number;
  /** Largest output the plan allows, in pixels (Infinity for none). */
  maxOutputPixels: number;
  /** The background image's bytes (`bg_image` / `bg_image_url`), checked from its header; decoded when rendering. */
  background?: Buffer | undefined;
  /**
   * The operation the quota and usage are charged under (default: a new one per request). A job's
   * image names its own, so one run again elsewhere after a crash is charged once (src/core/jobs).
   */
  chargeOp?: string | undefined;
  /** The `hints` part (image/hints.ts), its header checked against the image; undefined for none. */
  hints?: Buffer | undefined;
  /**
   * The upload is this request's alone (a synchronous request's body, read by takeOrder; not a
   * job's image, which its store keeps): the cutout lends it to the tasks that read it and moves
   * it into the render (pixel-pool.ts), and whatever is left of it is freed as the request ends.
   */
  ownUpload?: boolean | undefined;
}

/**
 * Step 2: what the caller asks for. Options in the query string and the model are checked
 * before the upload is read; then the upload, its form fields, and the image's header (type and
 * size, before any decode) against the plan.
 */
export async function takeOrder(scope: RequestScope, plan: Plan, deps: OrderDeps): Promise<Order> {
  const { request, signal } = scope;
  const optionsUrl = deps.queryOptions === false ? '/' : request.url;
  const early = parseOutputOptions({}, optionsUrl, request.headers);
  checkPlanOptions(plan, early.requested);
  checkPlanQuality(plan, early.options.quality);
  await untilAborted(deps.verifier.ensure(chooseModel(early.options.model, plan, deps.models, deps.defaultModel)), signal);

  const limits = { ...deps.upload, maxFileBytes: maxUploadBytes(plan, deps.upload.maxFileBytes), maxBackgroundBytes: deps.background.maxBytes };
  const upload = await (deps.readInput ?? readBgcutInput)(request, limits, deps.imageUrl, signal);
  scope.uploadDone();
  deps.metrics.bytesIn.inc(upload.file.length);
  // Freed as the request ends, however it ends, unless a task took it before (a moved upload
  // reads as empty here): not left for the host thread's next full collection (upload-bytes.ts).
  const file = upload.file;
  scope.hold(() => releaseUpload(file));

  const { options: output, requested } = parseOutputOptions(upload.fields, optionsUrl, request.headers);
  // The bg_image part is the same option as bg_image_url for a plan's list.
  checkPlanOptions(plan, upload.parts?.[BACKGROUND_PART] ? [...requested, 'bg_image_url'] : requested);
  checkPlanQuality(plan, output.quality);
  const modelName = chooseModel(output.model, plan, deps.models, deps.defaultModel);
  await untilAborted(deps.verifier.ensure(modelName), signal);
  const probe = await probeImage(upload.file, { maxInputPixels: deps.maxInputPixels });
  const pixels = probe.width * probe.height;
  const maxOutputPixels = checkImageSize(plan, pixels, output);
  checkOutputSize(output, maxOutputPixels);
  // An empty hints part (a form's unfilled file input) is no hints.
  const hints = upload.parts?.[HINTS_FIELD]?.file;
  if (hints && hints.length > 0) await probeHints(hints, probe, deps.maxInputPixels);
  const background = await readBackgroundImage(upload, output, deps.imageUrl, deps.background, signal);
  return { upload, output, modelName, probe, pixels, maxOutputPixels, hints: hints && hints.length > 0 ? hints : undefined, background, ownUpload: true };
}
