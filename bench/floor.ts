/**
 * The `floor` section of `npm run bench`: the API's own CPU per image against the least work its
 * libraries need for the same photo and the same output, done directly in one process.
 *
 * The floor, per output variant, is the sum of the medians (warm) of:
 * - the model input: the upload decoded and resized to the model's size, the way the API ships
 *   (resizeFillRgb: libvips reduces the shrinking axes, enlargeBicubic grows the others, the same
 *   bytes as sharp's one call at a third of its CPU on a 1 MP photo). Two ways, the cheaper one counts: (a) straight from the encoded bytes (JPEG shrink-on-load), the output decoding
 *   the bytes again; (b) one full-size decode to raw pixels, resized from there, the output
 *   reading those pixels;
 * - the mask upscale from a ready model-size mask (the model's real answer) to the full size,
 *   bilinear: the cheaper of sharp's resize (kernel `linear`) and the project's own kernel
 *   (upscaleMask, the same formula), since the floor is the least work;
 * - the encode of the cutout: sharp joins the colour and the upscaled alpha as it encodes
 *   (PNG, WebP), or flattens them over the colour (JPEG on a colour); `channels=alpha` encodes
 *   the mask alone and needs no full-size decode at all.
 * PNG, WebP and JPEG on a colour also get a same-output floor (FloorResult.sameOutputMs): the
 * API clears the colour of fully transparent pixels before encoding, and the encoders compress
 * those runs much faster (PNG at 24 MP: 297 vs 1069 ms), so the floor above encodes a different,
 * larger file; a JPEG on a colour is composed by the project's kernel and encoded opaque.
 * CPU time is process.cpuUsage() around each awaited call: user + system of every thread of the
 * process, so libvips's and libuv's threads count.
 *
 * The API's CPU per image is its process's user + system time from /proc over `runs` requests
 * (the mean: /proc counts in 10 ms ticks), after unmeasured warm-up requests, the inference
 * server excluded. Both include everything each side does; the API's also its HTTP, multipart,
 * key check, gRPC and foreground colour estimation, which the floor leaves out.
 */
import sharp, { type Sharp } from 'sharp';
import type { PreprocessingProfile } from '../src/core/image/profile.js';
import { clearTransparent, composeOpaque, composeRgba } from '../src/core/image/output.js';
import { encodePngRgbaFast, usesFastPng } from '../src/core/image/png-encoder.js';
import { upscaleMask } from '../src/core/image/tensor.js';
import { resizeFillRgb } from '../src/core/image/fill-resize.js';

export interface FloorVariant {
  name: string;
  /** Query string of the API request. */
  query: string;
  /** A second file part sent beside the image: the brush's hints (optionHints), or the photo itself as `bg_image`. */
  part?: 'hints' | 'bg_image';
}

export const FLOOR_VARIANTS: FloorVariant[] = [
  { name: 'png', query: 'format=png' },
  { name: 'webp', query: 'format=webp' },
  { name: 'jpg on colour', query: 'format=jpg&bg_color=%231e90ff' },
  { name: 'channels=alpha', query: 'channels=alpha' },
];
/**
 * The option-cost table of the floor section: each output option on its own, against plain PNG
 * (the same photo, requests interleaved option by option so the machine's load falls on all
 * alike). `part` sends a second file part beside the image (hints from optionHints, or the photo as bg_image). Add an option here when it lands.
 */
export const OPTION_COSTS: FloorVariant[] = [
  { name: 'png (baseline)', query: 'format=png' },
  { name: 'roi', query: 'format=png&roi=10%25%2010%25%2090%25%2090%25' },
  { name: 'format=zip', query: 'format=zip' },
  { name: 'scale + position', query: 'format=png&scale=80%25&position=50%25%20100%25' },
  { name: 'crop + crop_margin', query: 'format=png&crop=true&crop_margin=10%25' },
  { name: 'add_shadow', query: 'format=png&add_shadow=true' },
  { name: 'bg_color (png)', query: 'format=png&bg_color=%231e90ff' },
  { name: 'output_size + padding', query: 'format=png&output_size=1200x1200&padding=10%25' },
  { name: 'hints', query: 'format=png', part: 'hints' },
  { name: 'bg_image (the photo behind itself)', query: 'format=png', part: 'bg_image' },
];

/**
 * A hints part for the option-cost table, as the dashboard's brush sends one: a PNG at most
 * 1024 px on its long side, of the photo's aspect, transparent with a white (keep) band along
 * the top and a black (remove) block in the middle: about 12 % of the area marked.
 */
export async function optionHints(width: number, height: number): Promise<Buffer> {
  const scale = Math.min(1, 1024 / Math.max(width, height));
  const w = Math.max(1, Math.round(width * scale));
  const h = Math.max(1, Math.round(height * scale));
  const data = Buffer.alloc(w * h * 4);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const keep = y < h * 0.08;
      const remove = Math.abs(x - w / 2) < w * 0.1 && Math.abs(y - h / 2) < h * 0.1;
      if (keep) data.set([255, 255, 255, 255], (y * w + x) * 4);
      else if (remove) data.set([0, 0, 0, 255], (y * w + x) * 4);
    }
  }
  return sharp(data, { raw: { width: w, height: h, channels: 4 } }).png().toBuffer();
}

const COLOUR = { r: 0x1e, g: 0x90, b: 0xff };
const JPEG = { quality: 90, chromaSubsampling: '4:4:4' } as const;
/**
 * The API's default PNG settings: its RGBA PNGs by the fast encoder (RemoveBgOptions.pngEncoder,
 * png-encoder.ts; sharp when it does not load, as in the API), grey ones by sharp at level 2
 * (pngCompressionLevel): the floor is measured with the shipped settings.
 */
const PNG_LEVEL = 2;

/** An RGBA PNG the API's way: the fast encoder up to its size (FAST_PNG_MAX_PIXELS), else sharp at the shipped level. */
function encodeRgbaPng(rgba: Buffer, width: number, height: number): Promise<Buffer> {
  const fast = usesFastPng('napi-rs', width, height) ? encodePngRgbaFast(rgba, width, height) : null;
  return fast ? Promise.resolve(fast) : sharp(rgba, { raw: { width, height, channels: 4 } }).png({ compressionLevel: PNG_LEVEL }).toBuffer();
}

const cpuNow = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
const medianOf = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/** Median CPU ms of `fn` over `runs` calls, after two unmeasured ones. */
async function cpuMedian<T>(runs: number, fn: () => Promise<T>): Promise<{ ms: number; result: T }> {
  let result = await fn();
  await fn();
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) {
    const before = cpuNow();
    result = await fn();
    samples.push(cpuNow() - before);
  }
  return { ms: medianOf(samples), result };
}

/**
 * The cutout's encode from an opaque source (the JPEG's bytes or its raw RGB) and the alpha.
 * No removeAlpha() here: sharp applies it after joinChannel, so it would drop the joined alpha
 * and encode an opaque RGB image (as this floor did until this round).
 */
export function encodeVariant(source: Sharp, alpha: Buffer, width: number, height: number, variant: FloorVariant): Promise<Buffer> {
  const joined = source.joinChannel(alpha, { raw: { width, height, channels: 1 } });
  switch (variant.name) {
    case 'png':
      if (!usesFastPng('napi-rs', width, height)) return joined.png({ compressionLevel: PNG_LEVEL }).toBuffer();
      // The fast encoder takes a whole RGBA buffer: sharp joins it.
      return joined
        .raw()
        .toBuffer()
        .then((rgba) => encodeRgbaPng(rgba, width, height));
    case 'webp':
      return joined.webp({ quality: 90, alphaQuality: 100, effort: 4 }).toBuffer();
    case 'jpg on colour':
      // sharp flattens before it joins channels (and the JPEG saver would flatten on black), so
      // the joined image is made first: a dearer way than the same-output floor's compose.
      return joined
        .raw()
        .toBuffer()
        .then((rgba) => sharp(rgba, { raw: { width, height, channels: 4 } }).flatten({ background: COLOUR }).jpeg(JPEG).toBuffer());
    default:
      throw new Error(`no encode for ${variant.name}`);
  }
}

export interface FloorResult {
  /** The floor: CPU ms per image. */
  ms: number;
  /**
   * JPEG on a colour: the one decode, the resize, the compose over the colour (the project's
   * kernel) and the opaque encode, the upscale. PNG and WebP: the floor for the API's own output, whose fully transparent pixels have their
   * colour cleared (output.ts): the one decode, the clear (the project's memchr-driven kernel),
   * the resize, the upscale and the encode of the cleared colour, which deflate and WebP
   * compress faster than the photo's own colours under alpha 0 (PNG: the RGBA composed by
   * composeRgba for the shipped fast encoder, which takes it whole). `ms` encodes the photo's
   * colours as they are: a different, larger file.
   */
  sameOutputMs?: number;
  /** Its parts (medians, ms) and which way of making the model input was cheaper. */
  parts: Record<string, number>;
  inputWay: 'shrink-on-load' | 'one decode';
}

/**
 * The floor for one upright opaque image (a photo: JPEG) and one output variant, given the
 * model's mask at its own size.
 */
export async function measureFloor(bytes: Buffer, modelMask: Buffer, profile: PreprocessingProfile, variant: FloorVariant, runs: number): Promise<FloorResult> {
  const { width, height, orientation, depth } = await sharp(bytes).metadata();
  if (!width || !height) throw new Error('image without a size');
  const { width: mw, height: mh } = profile;
  // Exact (as the API decides in enlargesExactly) for an upright 8-bit photo, as the floor's are.
  const exact = (orientation ?? 1) === 1 && depth === 'uchar';
  const toModel = (s: Sharp) => resizeFillRgb(s.removeAlpha(), width, height, mw, mh, exact);

  const viaSharp = await cpuMedian(runs, () => sharp(modelMask, { raw: { width: mw, height: mh, channels: 1 } }).resize(width, height, { fit: 'fill', kernel: 'linear' }).extractChannel(0).raw().toBuffer());
  const viaKernel = await cpuMedian(runs, async () => upscaleMask(modelMask, mw, mh, width, height));
  const upscale = Math.min(viaSharp.ms, viaKernel.ms);
  const alpha = viaKernel.result;

  // (a) from the encoded bytes, twice.
  const inputA = await cpuMedian(runs, () => toModel(sharp(bytes)));
  if (variant.name === 'channels=alpha') {
    const encode = await cpuMedian(runs, () => sharp(alpha, { raw: { width, height, channels: 1 } }).toColourspace('b-w').png({ compressionLevel: PNG_LEVEL }).toBuffer());
    return {
      ms: inputA.ms + upscale + encode.ms,
      parts: { modelInput: inputA.ms, upscaleSharp: viaSharp.ms, upscaleKernel: viaKernel.ms, encode: encode.ms },
      inputWay: 'shrink-on-load',
    };
  }
  const encodeA = await cpuMedian(runs, () => encodeVariant(sharp(bytes), alpha, width, height, variant));
  // (b) one decode, resized and encoded from the raw pixels.
  const decode = await cpuMedian(runs, () => sharp(bytes).removeAlpha().raw().toBuffer());
  const rgb = decode.result;
  const raw = () => sharp(rgb, { raw: { width, height, channels: 3 } });
  const resizeB = await cpuMedian(runs, () => toModel(raw()));
  const encodeB = await cpuMedian(runs, () => encodeVariant(raw(), alpha, width, height, variant));
  const a = inputA.ms + encodeA.ms;
  const b = decode.ms + resizeB.ms + encodeB.ms;
  const parts: Record<string, number> =
    a <= b
      ? { modelInput: inputA.ms, encodeFromBytes: encodeA.ms }
      : { decode: decode.ms, resizeToModel: resizeB.ms, encodeFromRaw: encodeB.ms };
  // (c) the API's output made the API's way: for PNG and WebP, transparent pixels' colour
  // cleared before the encode; for a JPEG on a colour, composed over it by the project's kernel
  // (into a new buffer: the same work as the API's in-place compose).
  let sameOutput: { ms: number; parts: Record<string, number> } | undefined;
  if (variant.name === 'jpg on colour') {
    // The API's way: the project's compose kernel over the colour, then an opaque encode.
    // In place, as the API composes (opaque pixels are not copied), on a copy of `rgb`; the
    // copy itself does not count.
    const compose = await cpuMedian(runs, async () => {
      const copy = Buffer.from(rgb);
      return composeOpaque(copy, alpha, { ...COLOUR, alpha: 1 }, copy);
    });
    const copy = await cpuMedian(runs, async () => Buffer.from(rgb));
    const composeMs = Math.max(0, compose.ms - copy.ms);
    const composed = compose.result;
    const encodeC = await cpuMedian(runs, () => sharp(composed, { raw: { width, height, channels: 3 } }).jpeg(JPEG).toBuffer());
    const ms = decode.ms + resizeB.ms + composeMs + encodeC.ms + upscale;
    // The other ways make this file too (flattened over the colour): the cheapest counts.
    sameOutput = {
      ms: Math.min(ms, Math.min(a, b) + upscale),
      parts: { decode: decode.ms, resizeToModel: resizeB.ms, compose: composeMs, encodeComposed: encodeC.ms },
    };
  } else if (variant.name === 'png' && usesFastPng('napi-rs', width, height)) {
    // The API's way with the fast encoder: the project's kernel composes the RGBA, transparent
    // pixels cleared (composeRgba), and the encoder takes it whole.
    const compose = await cpuMedian(runs, async () => composeRgba(rgb, alpha, null));
    const composed = compose.result;
    const encodeC = await cpuMedian(runs, () => encodeRgbaPng(composed, width, height));
    sameOutput = { ms: decode.ms + resizeB.ms + compose.ms + encodeC.ms + upscale, parts: { decode: decode.ms, resizeToModel: resizeB.ms, compose: compose.ms, encodeComposed: encodeC.ms } };
  } else if (variant.name === 'png' || variant.name === 'webp') {
    const clear = await cpuMedian(runs, async () => clearTransparent(Buffer.from(rgb), alpha));
    const copy = await cpuMedian(runs, async () => Buffer.from(rgb));
    const cleared = clear.result;
    const clearedRaw = () => sharp(cleared, { raw: { width, height, channels: 3 } });
    const encodeC = await cpuMedian(runs, () => encodeVariant(clearedRaw(), alpha, width, height, variant));
    // The copy only keeps `rgb` intact for the other measurements: the clear alone counts.
    const clearMs = Math.max(0, clear.ms - copy.ms);
    sameOutput = { ms: decode.ms + resizeB.ms + clearMs + encodeC.ms + upscale, parts: { decode: decode.ms, resizeToModel: resizeB.ms, clear: clearMs, encodeCleared: encodeC.ms } };
  }
  return {
    ms: Math.min(a, b) + upscale,
    ...(sameOutput ? { sameOutputMs: sameOutput.ms } : {}),
    parts: { ...parts, upscaleSharp: viaSharp.ms, upscaleKernel: viaKernel.ms, ...sameOutput?.parts },
    inputWay: a <= b ? 'shrink-on-load' : 'one decode',
  };
}
