/**
 * How to turn an image into a model's input tensor and its output back into a mask. Any ONNX
 * segmentation model that takes one NCHW RGB float tensor and returns one [N,1,H,W] map of
 * foreground probability can be served with its own profile.
 */
export interface PreprocessingProfile {
  /** Name of the model's input tensor. */
  inputName: string;
  /** Name of the output tensor holding the mask. */
  outputName: string;
  /** Model input width and height in pixels; the image is resized to exactly this (no letterbox). */
  width: number;
  height: number;
  /** Per-channel (R, G, B) normalisation: value = (pixel / 255 - mean) / std. */
  mean: [number, number, number];
  std: [number, number, number];
  /**
   * Stretch the output's range to 0..1 before use. ISNet's raw output rarely reaches exactly 0
   * or 1; the reference pipelines (rembg, imgly) stretch it.
   */
  minMaxNormalize: boolean;
}

/** ISNet (DIS), as shipped in @imgly/background-removal-data. */
export const ISNET_PROFILE: PreprocessingProfile = {
  inputName: 'input',
  outputName: 'output',
  width: 1024,
  height: 1024,
  mean: [0.5, 0.5, 0.5],
  std: [1, 1, 1],
  minMaxNormalize: true,
};

export const PROFILES = { isnet: ISNET_PROFILE } as const;

export function validateProfile(profile: PreprocessingProfile): void {
  const sizeOk = (n: number) => Number.isInteger(n) && n >= 8 && n <= 4096;
  if (!sizeOk(profile.width) || !sizeOk(profile.height)) throw new RangeError('profile width and height must be integers in 8..4096');
  if (!profile.inputName || !profile.outputName) throw new RangeError('profile inputName and outputName are required');
  if (profile.mean.length !== 3 || profile.std.length !== 3 || profile.std.some((s) => !(s > 0))) {
    throw new RangeError('profile mean and std need three values, std > 0');
  }
}
