import type { BestPasses, Quality } from './passes.js';

/**
 * How to turn an image into a model's input tensor and its output back into a mask. Any ONNX
 * segmentation model that takes one RGB tensor (8-bit pixels, or normalised floats) and returns
 * one [1,1,H,W] map of foreground probability can be served with its own profile.
 */
export interface PreprocessingProfile {
  /** Name of the model's input tensor. */
  inputName: string;
  /** Name of the output tensor holding the mask. */
  outputName: string;
  /** Model input width and height in pixels; the image is resized to exactly this (no letterbox). */
  width: number;
  height: number;
  /**
   * What the input tensor holds. `UINT8`: the decoder's 8-bit pixels as they are (the model
   * casts and normalises inside its graph; `mean`/`std` unused). `FP32`: normalised floats,
   * value = (pixel / 255 - mean) / std. Default `FP32`.
   */
  inputDatatype?: InputDatatype;
  /** `NHWC` ([1,H,W,3], interleaved, as decoded) or `NCHW` ([1,3,H,W], planar). Default `NCHW`. */
  inputLayout?: InputLayout;
  /** Per-channel (R, G, B) normalisation of FP32 inputs. */
  mean: [number, number, number];
  std: [number, number, number];
  /**
   * What the mask output holds: `FP32` probabilities 0..1, or fixed point `UINT8` (value / 255)
   * or `UINT16` (value / 65535). Default `FP32`.
   */
  outputDatatype?: MaskDatatype;
  /**
   * Stretch the output's range to 0..1 before use. ISNet's raw output rarely reaches exactly 0
   * or 1; the reference pipelines (rembg, imgly) stretch it. False when the model's graph already
   * does (the prepared ISNet).
   */
  minMaxNormalize: boolean;
  /**
   * What each quality mode runs when the served model's input height and width are free (-1 in
   * its metadata): the whole image's size and, for `best`, its passes. One table per model, so a
   * model family brings its own. A fixed-size model, or a mode not listed, runs at width x height
   * (and `best` with BEST_PASSES).
   */
  modes?: Partial<Record<Quality, ModePlan>>;
  /**
   * `sigmoid`: the FP32 output holds logits (BiRefNet), turned into probabilities before the
   * stretch. Default `none`: the output already holds probabilities. Only for FP32 outputs: a
   * prepared model applies it inside its graph.
   */
  outputActivation?: OutputActivation;
  /** What `GET /v1/models` says about the model (family, licence); absent for a custom one. */
  about?: ModelAbout;
}

/** What one quality mode runs on a model that takes any size. */
export interface ModePlan {
  /** Side of the square model input for the whole image, in pixels (ISNet: a multiple of 32). */
  size: number;
  /** `best`: the passes after the first (crop, mirrors, other sizes of the whole image). */
  passes?: BestPasses;
  /**
   * The served model the whole-image passes run on (the first pass, its mirror, other scales),
   * by its name on the inference servers. Default: the request's model. Used only when the
   * servers serve it with the same tensors (see ModelVerifier.passModel) and the request named no
   * model; otherwise the request's model runs every pass.
   */
  model?: string;
  /** `best`: the served model the crop passes (the object's crop and its mirror, or tiles) run on. Default: `model`. */
  cropModel?: string;
}

export type OutputActivation = 'none' | 'sigmoid';

/** What a quality mode costs on a model, as `GET /v1/models` lists it. */
export interface ModeCost {
  /** Model input width and height, in pixels, for the whole image. */
  size: number;
  /** Most model passes one cutout runs in this mode. */
  passes: number;
}

export interface ModelAbout {
  /** The model family (`u2net`, `isnet`, `birefnet`, `bria-rmbg`, `ben2`). */
  family: string;
  /** The weights' licence, SPDX where there is one (e.g. `MIT`, `Apache-2.0`, `CC-BY-NC-4.0`). */
  licence: string;
  /** False when the licence forbids commercial use (bria-rmbg 2.0); null when unknown (a custom file). */
  commercialUse: boolean | null;
}

export type InputDatatype = 'FP32' | 'UINT8';
export type InputLayout = 'NCHW' | 'NHWC';
export type MaskDatatype = 'FP32' | 'UINT8' | 'UINT16';

/**
 * ISNet prepared by the inference server (`isnet`, the default): 8-bit NHWC pixels in, the
 * stretched 8-bit mask out. The cast, transpose, normalisation, stretch and "no foreground" rule
 * run inside the graph, so the API does no per-pixel work before or after the model.
 */
export const ISNET_PROFILE: PreprocessingProfile = {
  inputName: 'image',
  outputName: 'mask',
  width: 1024,
  height: 1024,
  inputDatatype: 'UINT8',
  inputLayout: 'NHWC',
  mean: [0.5, 0.5, 0.5],
  std: [1, 1, 1],
  outputDatatype: 'UINT8',
  minMaxNormalize: false,
  // Sizes, passes and the model of each pass, per mode, when the prepared model takes any size
  // (docs/quality.md). `isnet-int8` is the same ISNet in 8 bits (docs/model-int8.md): it runs
  // where the eval found it as accurate as the float model (the accuracy rule, checked in CI).
  modes: {
    fast: { size: 608, model: 'isnet-int8' },
    balanced: { size: 1024, model: 'isnet-int8' },
    best: {
      size: 1024,
      // Float throughout: at 8 bits the crop passes lose fine structure (docs/model-int8.md), and
      // the 8-bit first pass with float crops was not measured to the end (docs/quality.md).
      model: 'isnet',
      passes: { mirror: false, cropMaxArea: 1, cropMargin: 0.1, cropMirror: true, cropMerge: 'replace', cropWeight: 1, mirrorMerge: 'max', tileMinSide: Infinity },
    },
  },
};

/** ISNet (DIS) as shipped in @imgly/background-removal-data (`isnet-fp16`, `isnet-quint8`): FP32 NCHW in, FP32 out. */
export const ISNET_FP32_PROFILE: PreprocessingProfile = {
  inputName: 'input',
  outputName: 'output',
  width: 1024,
  height: 1024,
  inputDatatype: 'FP32',
  inputLayout: 'NCHW',
  mean: [0.5, 0.5, 0.5],
  std: [1, 1, 1],
  outputDatatype: 'FP32',
  minMaxNormalize: true,
};

export const PROFILES = { isnet: ISNET_PROFILE, 'isnet-fp32': ISNET_FP32_PROFILE } as const;

/** The input tensor's shape for this profile (batch of one). */
export function inputShape(profile: PreprocessingProfile): number[] {
  return (profile.inputLayout ?? 'NCHW') === 'NHWC' ? [1, profile.height, profile.width, 3] : [1, 3, profile.height, profile.width];
}

/** The mask output's shape for this profile. */
export function maskShape(profile: PreprocessingProfile): number[] {
  return [1, 1, profile.height, profile.width];
}

export function validateProfile(profile: PreprocessingProfile): void {
  const sizeOk = (n: number) => Number.isInteger(n) && n >= 8 && n <= 4096;
  if (!sizeOk(profile.width) || !sizeOk(profile.height)) throw new RangeError('profile width and height must be integers in 8..4096');
  if (!profile.inputName || !profile.outputName) throw new RangeError('profile inputName and outputName are required');
  if (profile.mean.length !== 3 || profile.std.length !== 3 || profile.std.some((s) => !(s > 0))) {
    throw new RangeError('profile mean and std need three values, std > 0');
  }
  if (!['FP32', 'UINT8', undefined].includes(profile.inputDatatype)) throw new RangeError('profile inputDatatype must be FP32 or UINT8');
  if (!['NCHW', 'NHWC', undefined].includes(profile.inputLayout)) throw new RangeError('profile inputLayout must be NCHW or NHWC');
  if (!['FP32', 'UINT8', 'UINT16', undefined].includes(profile.outputDatatype)) throw new RangeError('profile outputDatatype must be FP32, UINT8 or UINT16');
  if (!['none', 'sigmoid', undefined].includes(profile.outputActivation)) throw new RangeError('profile outputActivation must be none or sigmoid');
  if (profile.outputActivation === 'sigmoid' && (profile.outputDatatype ?? 'FP32') !== 'FP32') {
    throw new RangeError('profile outputActivation sigmoid needs an FP32 output (a fixed-point mask is already a probability)');
  }
}
