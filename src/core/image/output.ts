import sharp, { type Sharp } from 'sharp';
import { DEFAULT_OUTPUT, marginPixels, type OutputOptions, type Rgba } from '../output-options.js';
import { jsonAnswer, jsonAnswerSpec, type JsonAnswerRequest, type JsonAnswerSpec } from '../pipeline/json-answer.js';
import { estimateForeground, type ImageView } from './foreground.js';
import { buildFullSizeMask, splitAlpha, type MaskPlan } from './full-size-mask.js';
import { countKernel } from './kernel-calls.js';
import { alphaBoxSimd, composeOpaqueSimd, composeOverColourSimd, composeRgbaSimd } from './render-compose.js';
import { decodeRaw, type ImageLimits, type Probe, type Segmentation } from './pipeline.js';
import { overColor, overPhoto } from './backdrop.js';
import { paddedPlacement, placedBox, placeSubject } from './place.js';
import { applyHints } from './hints.js';
import { clearOutsideRegion } from './roi.js';
import { addShadow } from './shadow.js';
import { encodeZip } from './zip-output.js';
import type { PixelPool } from './pixel-pool.js';
import { encodePngRgbaFast, encodePngRgbaFastInBands, usesFastPng, type PngEncoderName } from './png-encoder.js';
import { Scratch } from './scratch.js';
import { releaseNow } from '../../util/release-now.js';
import type { MadePixels } from './render-bands.js';
import { releaseUpload } from '../upload-bytes.js';

export interface Box {
  top: number;
  left: number;
  width: number;
  height: number;
}

export interface RenderOptions {
  /** zlib level of PNG output, 0-9 (sharp's encoder: every PNG when `pngEncoder` is sharp, else grey and opaque ones). */
  pngCompressionLevel: number;
  /** Encoder of RGBA PNG output (png-encoder.ts). Default napi-rs, sharp when it fails to load. */
  pngEncoder?: PngEncoderName;
  /** Most row bands the fast encoder splits this render's PNG into (png-bands.ts); set by the pool from its idle cores. Default 1. */
  pngBands?: number;
  /** Largest output, in pixels: `auto` scales down to it. Infinity for none. */
  maxOutputPixels: number;
  /** Recover the object's own colour at soft edges (see foreground.ts). */
  foregroundEstimation: boolean;
}

export interface Rendered {
  /** The encoded image; empty when `json` was made (the JSON holds it: only the JSON reaches the main thread). */
  body: Buffer;
  /** The encoded image's length in bytes (also when `body` was left in the worker). */
  bodyBytes?: number;
  contentType: string;
  extension: string;
  width: number;
  height: number;
  /** The foreground's box in the output's coordinates; null when nothing was found. */
  foreground: Box | null;
  /** The JSON answer asked for (`response=json`'s or remove.bg's: pipeline/json-answer.ts), made beside the image. */
  json?: Buffer | undefined;
  /** Row bands the fast encoder made the PNG in (png-bands.ts; 1: whole); absent when it did not encode it. */
  pngBands?: number;
  /** Milliseconds: the full-size decode (when the render made it), the pixel work, the encode. */
  timings: { decode: number; postprocess: number; encode: number };
}

/** What a pixel-pool worker needs to render a segmentation (plain data and buffers only). */
export interface RenderJob {
  bytes: Buffer;
  probe: Probe;
  limits: ImageLimits;
  /**
   * The full-size decode segment() made alongside, if any. The render writes it in place: the
   * pool sends a copy, or the memory itself when it is shared (segment()'s is), which the caller
   * then gives up.
   */
  decoded?: Buffer | undefined;
  mask: MaskPlan;
  /** The working-size view for foreground estimation; absent when the output needs none. */
  view?: ImageView | undefined;
  options: OutputOptions;
  render: RenderOptions;
  /** Also make this JSON answer (pipeline/json-answer.ts), which holds the image in base64. */
  json?: JsonAnswerSpec | undefined;
  /** The request's `hints` part (hints.ts), checked by probeHints. */
  hints?: Buffer | undefined;
  /** `bg_image` / `bg_image_url`: the photo to put behind the cutout (checked from its header). */
  background?: Buffer | undefined;
  /**
   * The full-size mask and RGBA made already, in row bands by several workers
   * (render-bands.ts): the render encodes them. Only for a render composesStraightToEncoder takes.
   */
  made?: MadePixels | undefined;
}

export type RenderResult = Rendered;

/**
 * Whether the render composes the whole image at its full size, with no background, into an
 * RGBA that goes to the fast PNG encoder as it is (renderWith's `straightToEncoder` with no crop
 * region and no background: the default cutout). Decided from the job alone, before any pixel
 * is made: what render-bands.ts splits.
 */
export function composesStraightToEncoder(job: Pick<RenderJob, 'probe' | 'options' | 'render' | 'background'>): boolean {
  const { options, render } = job;
  const { width, height } = job.probe;
  if (options.channels !== 'rgba' || options.format !== 'png' || options.crop || options.outputSize || options.bgColor || options.shadow || job.background) return false;
  if (options.scale !== null || options.position !== 'original') return false;
  const cap = Math.min(SIZE_PIXELS[options.size], render.maxOutputPixels);
  const factor = Math.min(1, Math.sqrt(cap / (width * height)));
  if (Math.max(1, Math.floor(width * factor)) !== width || Math.max(1, Math.floor(height * factor)) !== height) return false;
  return usesFastPng(render.pngEncoder ?? 'napi-rs', width, height);
}

/** Alpha at or above this (5 %) counts as foreground for the box and for cropping. */
export const FOREGROUND_THRESHOLD = 13;
/** `size=preview` output is at most this many pixels. */
export const PREVIEW_PIXELS = 250_000;
/** Most output pixels of each `size` (remove.bg's caps for preview, medium and hd), before the plan's own cap. */
export const SIZE_PIXELS: Record<OutputOptions['size'], number> = { preview: PREVIEW_PIXELS, medium: 1_500_000, hd: 4_000_000, full: Infinity, auto: Infinity };

/** Media type and file extension of each output format. */
export const FORMATS = {
  png: { contentType: 'image/png', extension: 'png' },
  webp: { contentType: 'image/webp', extension: 'webp' },
  jpg: { contentType: 'image/jpeg', extension: 'jpg' },
  avif: { contentType: 'image/avif', extension: 'avif' },
  zip: { contentType: 'application/zip', extension: 'zip' },
} as const;

/**
 * The smallest box holding every pixel with alpha >= FOREGROUND_THRESHOLD, or null. Each row is
 * read from the left up to its first such pixel and from the right down to its last, so only
 * background is read in full; four fully transparent pixels are skipped at a time.
 */
export function foregroundBox(alpha: Buffer, width: number, height: number, options: { simd?: boolean } = {}): Box | null {
  countKernel('foregroundBox');
  // The same box in WebAssembly SIMD (render-compose.ts); `simd: false` keeps to the JavaScript
  // below (the reference).
  if (options.simd !== false) {
    const box = alphaBoxSimd(alpha, width, { top: 0, bottom: height }, FOREGROUND_THRESHOLD, 255);
    if (box !== undefined) {
      countKernel('foregroundBox.simd');
      return box && { top: box.top, left: box.left, width: box.right - box.left + 1, height: box.bottom - box.top + 1 };
    }
  }
  const words = alpha.byteOffset % 4 === 0 ? new Uint32Array(alpha.buffer, alpha.byteOffset, alpha.length >> 2) : undefined;
  let top = height;
  let bottom = -1;
  let left = width;
  let right = -1;
  for (let y = 0; y < height; y++) {
    const row = y * width;
    const end = row + width;
    let i = row;
    while (i < end) {
      if (words && (i & 3) === 0 && i + 4 <= end && words[i >> 2] === 0) {
        i += 4;
        continue;
      }
      if (alpha[i]! >= FOREGROUND_THRESHOLD) break;
      i++;
    }
    if (i === end) continue;
    let j = end - 1;
    while (alpha[j]! < FOREGROUND_THRESHOLD) j--;
    if (y < top) top = y;
    bottom = y;
    if (i - row < left) left = i - row;
    if (j - row > right) right = j - row;
  }
  return bottom < 0 ? null : { top, left, width: right - left + 1, height: bottom - top + 1 };
}

/**
 * Drops what rendering will not need of the segmentation's model-size view (4 MB): the working
 * size for foreground estimation (about 0.2 MB, the same result), or nothing when the output
 * has no colour or no estimation. For a request about to wait for memory to render in.
 */
export async function keepOnlyWhatRenderNeeds(seg: Segmentation, options: OutputOptions, render: RenderOptions, pool: PixelPool): Promise<void> {
  const empty = Buffer.alloc(0);
  const model = seg.model;
  // The model-size view is replaced here: its image, when in memory of its own (segment()'s
  // `movable` model image), goes now, moved to the worker that samples it or freed, rather than
  // at the host thread's next full collection.
  if (options.channels === 'alpha' || !render.foregroundEstimation) {
    seg.model = { rgb: empty, alpha: empty, width: 0, height: 0 };
    releaseNow(model.rgb);
  } else seg.model = await pool.workingView(model, seg.width, seg.height, true);
}

/**
 * Turns a segmentation into the response image: foreground colour, background colour or
 * transparency, crop, size, format. With no foreground at all, the result is the whole image,
 * fully transparent (or all background colour), and `foreground` is null. The work runs in a
 * worker of `pool` (renderFullSize): this thread sends model-size buffers and the upload, and
 * gets the encoded image back. `json`: also make that JSON answer there (pipeline/json-answer.ts).
 */
export async function renderOutput(
  seg: Segmentation,
  options: OutputOptions,
  render: RenderOptions,
  pool: PixelPool,
  json?: JsonAnswerRequest,
  hints?: Buffer,
  background?: Buffer,
  /**
   * The segmentation is rendered once (the request's cutout): its model-size image, when in
   * memory of its own, is moved to the render's worker (or freed, when the render does not read
   * it) rather than copied, and reads as empty afterwards.
   */
  giveUp = false,
): Promise<Rendered> {
  // The model-size view (or the working-size one a waiting request kept): the worker samples the
  // working size from it (a few ms of loop, not on this thread).
  const view = options.channels !== 'alpha' && render.foregroundEstimation && seg.model.width > 0 ? seg.model : undefined;
  const decoded = seg.rgb.length > 0 ? seg.rgb : undefined;
  // The render writes the decode in place (foreground colour, composition): in shared memory
  // (segment()'s, from the pool) it is that same memory, so the segmentation gives it up here.
  seg.rgb = Buffer.alloc(0);
  if (giveUp && !view) releaseNow(seg.model.rgb);
  // An upload the segmentation alone holds (segment()'s `lendUpload`) is moved into the render
  // when the render reads it, and dies there, or is freed now when it does not (it has the
  // decode): not left for the host thread's next full collection.
  const giveUpUpload = giveUp && seg.ownBytes === true;
  const bytes = seg.bytes;
  if (giveUpUpload) {
    seg.bytes = Buffer.alloc(0);
    if (decoded) releaseUpload(bytes);
  }
  return pool.render({
    bytes,
    probe: seg.probe,
    limits: seg.limits,
    decoded,
    mask: seg.mask,
    view,
    options,
    render,
    json: json && jsonAnswerSpec(json, seg.confidence),
    hints,
    background,
  }, giveUp, giveUpUpload);
}

/**
 * renderOutput's work, in a pixel-pool worker: the full-size mask, the full-size decode (when
 * the output has colour, or the input has an alpha of its own to fold in), foreground colour,
 * composition, crop, size and encoding.
 */
export async function renderFullSize(job: RenderJob): Promise<Rendered> {
  const given: Loan[] = [];
  const loans = {
    take: (bytes: number) => given[given.push(rgbaScratch.take(bytes)) - 1]!,
    takeMask: (bytes: number) => given[given.push(maskScratch.take(bytes)) - 1]!,
  };
  try {
    return await renderWith(job, loans);
  } finally {
    for (const loan of given) loan.release();
  }
}

/**
 * The RGBA buffer a render composes for the fast PNG encoder, reused by the next render of this
 * thread (scratch.ts): 1 MP cutouts and smaller (4 MB); larger ones get a fresh buffer.
 */
const rgbaScratch = new Scratch(4 * 1_048_576);
/**
 * The full-size mask a render upscales the model's into, reused by the next render of this thread
 * in the same way: 4 MP and smaller. Nothing keeps the mask past the render (the encoders have
 * read it when the render ends). Counted as `maskScratchReused` / `maskScratchFresh`.
 */
const maskScratch = new Scratch(4 * 1_048_576, 'maskScratch');
type Loan = ReturnType<Scratch['take']>;

async function renderWith(job: RenderJob, loans: { take(bytes: number): Loan; takeMask(bytes: number): Loan }): Promise<Rendered> {
  const { probe, options, render, made } = job;
  const { width, height } = probe;
  let started = performance.now() - (made?.postprocessMs ?? 0);
  if (made && !composesStraightToEncoder(job)) throw new Error('pixels made in bands for a render that does not compose straight to the encoder');
  const alpha = made ? made.alpha : buildFullSizeMask(job.mask, width, height, loans.takeMask(width * height).buffer);
  // roi: only the region may be foreground (a step of its own, before anything reads the mask).
  if (options.roi) clearOutsideRegion(alpha, width, height, options.roi);
  // hints: a person's keep/remove strokes win over the model and the roi, blended at their edges.
  if (job.hints) await applyHints(alpha, width, height, job.hints, job.limits.maxInputPixels);
  let rgb: Buffer = Buffer.alloc(0);
  let decodeMs = 0;
  if (!made && (options.channels !== 'alpha' || probe.hasAlpha)) {
    const t0 = performance.now();
    const decoded = job.decoded ?? (await decodeRaw(job.bytes, probe, job.limits));
    decodeMs = performance.now() - t0;
    started += decodeMs;
    rgb = probe.hasAlpha ? splitAlpha(decoded, alpha) : decoded;
  }
  const box = made ? made.box : foregroundBox(alpha, width, height);

  // Region of the input to keep: the whole image, or the foreground box plus margin (which may
  // reach past the image: that part is filled like the background).
  // output_size fits the foreground box (with crop=true, plus its margin) into its canvas.
  let region: Box = { top: 0, left: 0, width, height };
  if ((options.crop || options.outputSize) && box) {
    // crop_margin: each side px or % of the box's size along it (CSS order resolved at parsing).
    const m = options.crop ? options.cropMargin : DEFAULT_OUTPUT.cropMargin;
    const top = marginPixels(m.top, box.height);
    const left = marginPixels(m.left, box.width);
    region = { top: box.top - top, left: box.left - left, width: box.width + left + marginPixels(m.right, box.width), height: box.height + top + marginPixels(m.bottom, box.height) };
  }
  // The canvas: the region, or output_size's exact size (the order step checked it against the caps).
  const canvas = options.outputSize ?? { width: region.width, height: region.height };

  // jpg has no alpha: it is shown on white unless a colour is asked for.
  // A background photo (bg_image) replaces the colour (parsing refuses both).
  const photo = options.channels === 'rgba' ? job.background : undefined;
  const background: Rgba | null = photo ? null : (options.bgColor ?? (options.format === 'jpg' && options.channels === 'rgba' ? { r: 255, g: 255, b: 255, alpha: 1 } : null));
  // add_shadow needs the cutout transparent until the shadow is under it, and a photo is fitted
  // to the final canvas: the background goes on last (backdrop.ts).
  const deferBackground = (options.shadow !== null || photo !== undefined) && options.channels === 'rgba';
  const kernelBackground = deferBackground ? null : background;
  const cap = Math.min(SIZE_PIXELS[options.size], render.maxOutputPixels);
  const factor = options.outputSize ? 1 : Math.min(1, Math.sqrt(cap / (canvas.width * canvas.height)));
  // Rounded down, so the output never passes the cap.
  const outWidth = Math.max(1, Math.floor(canvas.width * factor));
  const outHeight = Math.max(1, Math.floor(canvas.height * factor));
  const wholeAtFullSize = region.left === 0 && region.top === 0 && region.width === width && region.height === height && outWidth === width && outHeight === height;
  // RGBA PNG by the fast encoder (png-encoder.ts), which takes the whole RGBA buffer.
  // (Decided on the larger of input and output size: the whole RGBA is made at the input's.)
  const larger = outWidth * outHeight > width * height ? { w: outWidth, h: outHeight } : { w: width, h: height };
  const fastPng = options.format === 'png' && usesFastPng(render.pngEncoder ?? 'napi-rs', larger.w, larger.h);
  let raw: Buffer;
  let channels: 1 | 3 | 4;
  let joined: Sharp | undefined;
  let lent: Loan | undefined;
  if (options.channels === 'alpha') {
    raw = alpha;
    channels = 1;
  } else if (made) {
    // Composed by the bands (render-bands.ts): what the last branch below makes, straight to the encoder.
    raw = made.rgba;
    channels = 4;
  } else {
    // In place: the segmentation's colour is used once, here.
    const colour = render.foregroundEstimation ? await estimateForeground(rgb, alpha, width, height, job.view) : rgb;
    if (kernelBackground && kernelBackground.alpha >= 1) {
      raw = composeOpaque(colour, alpha, kernelBackground, colour);
      channels = 3;
    } else if (!kernelBackground && wholeAtFullSize && !fastPng) {
      // The common case: sharp joins colour and alpha as it streams them to the encoder, so no
      // full-size RGBA copy is made (the same pixels as composeRgba's).
      raw = clearTransparent(colour, alpha);
      channels = 4;
      joined = sharp(raw, { raw: { width, height, channels: 3 } }).joinChannel(alpha, { raw: { width, height, channels: 1 } });
    } else {
      // Straight to the fast encoder (nothing below touches it): composed into this thread's
      // reused buffer, given back once the encoder has copied it.
      const straightToEncoder = fastPng && wholeAtFullSize && !options.outputSize && options.scale === null && options.position === 'original' && !options.shadow && !deferBackground;
      if (straightToEncoder) lent = loans.take(width * height * 4);
      raw = composeRgba(colour, alpha, kernelBackground, lent?.buffer);
      channels = 4;
    }
  }
  const postprocess = performance.now() - started;

  // Fill for the part of a crop region outside the image.
  const fill =
    channels === 1 ? { r: 0, g: 0, b: 0, alpha: 1 } : kernelBackground ? { ...kernelBackground, alpha: channels === 3 ? 1 : kernelBackground.alpha } : { r: 0, g: 0, b: 0, alpha: 0 };
  let image = joined ?? sharp(raw, { raw: { width, height, channels } });
  // Whether `image` is still `raw` as it is (no crop, placement, size, shadow or backdrop after it).
  let untouched = joined === undefined;
  const inside = {
    left: Math.max(0, region.left),
    top: Math.max(0, region.top),
    right: Math.min(width, region.left + region.width),
    bottom: Math.min(height, region.top + region.height),
  };
  if (region.left !== 0 || region.top !== 0 || region.width !== width || region.height !== height) {
    untouched = false;
    image = sharp(
      await image
        .extract({ left: inside.left, top: inside.top, width: inside.right - inside.left, height: inside.bottom - inside.top })
        .extend({
          left: inside.left - region.left,
          top: inside.top - region.top,
          right: region.left + region.width - inside.right,
          bottom: region.top + region.height - inside.bottom,
          background: fill,
        })
        .raw()
        .toBuffer(),
      { raw: { width: region.width, height: region.height, channels } },
    );
  }

  // The subject's box in the region's coordinates; scale/position move it (place.ts), at full size.
  let subject: Box | null = box && { top: box.top - region.top, left: box.left - region.left, width: box.width, height: box.height };
  if (options.outputSize) {
    // The region fitted (times `scale`) into the canvas inside the padding, placed by `position` there.
    const target = paddedPlacement(region.width, region.height, canvas.width, canvas.height, options);
    const whole = { top: 0, left: 0, width: region.width, height: region.height };
    image = await placeSubject(image, region.width, region.height, channels, whole, target, fill, canvas);
    untouched = false;
    const kx = target.width / region.width;
    const ky = target.height / region.height;
    subject = subject && { top: target.top + subject.top * ky, left: target.left + subject.left * kx, width: subject.width * kx, height: subject.height * ky };
  } else if (subject && (options.scale !== null || options.position !== 'original')) {
    const target = placedBox(subject, region.width, region.height, options.scale, options.position);
    if (target.left !== subject.left || target.top !== subject.top || target.width !== subject.width || target.height !== subject.height) {
      image = await placeSubject(image, region.width, region.height, channels, subject, target, fill);
      untouched = false;
      subject = target;
    }
  }

  if (outWidth !== canvas.width || outHeight !== canvas.height) {
    image = image.resize(outWidth, outHeight, { fit: 'fill' });
    untouched = false;
  }
  if (channels === 1) image = image.toColourspace('b-w');

  const sx = outWidth / canvas.width;
  const sy = outHeight / canvas.height;
  const foreground = subject && {
    top: Math.round(subject.top * sy),
    left: Math.round(subject.left * sx),
    width: Math.max(1, Math.round(subject.width * sx)),
    height: Math.max(1, Math.round(subject.height * sy)),
  };
  if (options.shadow && channels === 4 && foreground) {
    image = await addShadow(image, outWidth, outHeight, foreground, options.shadow);
    untouched = false;
  }
  if (deferBackground && photo) {
    image = (await overPhoto(image, outWidth, outHeight, photo, options.format === 'jpg')).image;
    untouched = false;
  } else if (deferBackground && background) {
    image = (await overColor(image, outWidth, outHeight, background)).image;
    untouched = false;
  }

  if (lent && !untouched) throw new Error('the RGBA lent for the encoder was changed after it');
  const png = fastPng && channels === 4 ? await encodePng(image, untouched ? raw : undefined, outWidth, outHeight, render) : null;
  const body = png ? png.body : await encode(image, options.format, render.pngCompressionLevel);
  const rendered: Rendered = {
    body,
    ...(png?.pngBands ? { pngBands: png.pngBands } : {}),
    ...FORMATS[options.format],
    width: outWidth,
    height: outHeight,
    foreground,
    timings: { decode: decodeMs, postprocess, encode: 0 },
  };
  if (job.json) rendered.json = jsonAnswer(job.json, rendered);
  rendered.timings.encode = performance.now() - started - postprocess;
  return rendered;
}

/**
 * A PNG by the fast encoder when the image is RGBA (`rgba`: its pixels when already in a buffer),
 * else by sharp: grey and opaque PNGs keep their one or three channels.
 */
async function encodePng(image: Sharp, rgba: Buffer | undefined, width: number, height: number, render: RenderOptions): Promise<{ body: Buffer; pngBands?: number }> {
  const fast = async (pixels: Buffer, w: number, h: number) => {
    const most = render.pngBands ?? 1;
    if (most < 2) return { body: encodePngRgbaFast(pixels, w, h)!, pngBands: 1 };
    const { png, bands } = (await encodePngRgbaFastInBands(pixels, w, h, most))!;
    return { body: png, pngBands: bands };
  };
  if (rgba) return fast(rgba, width, height);
  const { data, info } = await image.raw().toBuffer({ resolveWithObject: true });
  if (info.channels === 4) return fast(data, info.width, info.height);
  return { body: await sharp(data, { raw: { width: info.width, height: info.height, channels: info.channels } }).png({ compressionLevel: render.pngCompressionLevel }).toBuffer() };
}

function encode(image: Sharp, format: OutputOptions['format'], pngCompressionLevel: number): Promise<Buffer> {
  switch (format) {
    case 'png':
      return image.png({ compressionLevel: pngCompressionLevel }).toBuffer();
    case 'webp':
      // Lossy colour, lossless alpha: edges stay exact.
      return image.webp({ quality: 90, alphaQuality: 100, effort: 4 }).toBuffer();
    case 'jpg':
      return image.jpeg({ quality: 90, chromaSubsampling: '4:4:4' }).toBuffer();
    case 'avif':
      return image.avif({ quality: 70, effort: 3 }).toBuffer();
    case 'zip':
      return encodeZip(image, pngCompressionLevel);
  }
}

/**
 * RGBA from colour + alpha, optionally over a translucent background. The colour of fully
 * transparent pixels is cleared: they are invisible, keeping them would ship the removed
 * background inside the file, and cleared runs make a PNG about four times smaller.
 */
export function composeRgba(rgb: Buffer, alpha: Buffer, background: Rgba | null, into?: Buffer, options: { simd?: boolean } = {}): Buffer {
  countKernel('composeRgba');
  const pixels = alpha.length;
  if (into && into.length !== pixels * 4) throw new RangeError(`composeRgba: ${into.length} bytes to write ${pixels} pixels into`);
  const out = into ?? Buffer.allocUnsafe(pixels * 4);
  // Without a background, the same bytes in WebAssembly SIMD (render-compose.ts); `simd: false`
  // keeps to the JavaScript below (the reference).
  if (!background && options.simd !== false && composeRgbaSimd(rgb, alpha, out)) return out;
  // Over a colour, the same bytes in WebAssembly (render-compose.ts: the doubles below, made once
  // per alpha value).
  if (background && options.simd !== false && composeOverColourSimd(rgb, alpha, background, out)) return out;
  if (!background && out.byteOffset % 4 === 0) {
    // The common case: integers only, one 32-bit write per pixel (RGBA in memory order).
    const words = new Uint32Array(out.buffer, out.byteOffset, pixels);
    const le = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
    // Little-endian with aligned colour and alpha: four pixels from three colour words and one
    // alpha word; four transparent pixels are one test.
    const quads = le && rgb.byteOffset % 4 === 0 && alpha.byteOffset % 4 === 0 ? pixels >> 2 : 0;
    if (quads > 0) {
      const colour = new Uint32Array(rgb.buffer, rgb.byteOffset, quads * 3);
      const alphas = new Uint32Array(alpha.buffer, alpha.byteOffset, quads);
      for (let q = 0, c = 0, o = 0; q < quads; q++, c += 3, o += 4) {
        const a = alphas[q]!;
        if (a === 0) {
          words[o] = words[o + 1] = words[o + 2] = words[o + 3] = 0;
          continue;
        }
        // Colour words: r0 g0 b0 r1 | g1 b1 r2 g2 | b2 r3 g3 b3 (first byte lowest).
        const w0 = colour[c]!;
        const w1 = colour[c + 1]!;
        const w2 = colour[c + 2]!;
        const a0 = a & 0xff;
        const a1 = (a >>> 8) & 0xff;
        const a2 = (a >>> 16) & 0xff;
        const a3 = a >>> 24;
        words[o] = a0 === 0 ? 0 : ((w0 & 0xffffff) | (a0 << 24)) >>> 0;
        words[o + 1] = a1 === 0 ? 0 : ((w0 >>> 24) | ((w1 & 0xffff) << 8) | (a1 << 24)) >>> 0;
        words[o + 2] = a2 === 0 ? 0 : ((w1 >>> 16) | ((w2 & 0xff) << 16) | (a2 << 24)) >>> 0;
        words[o + 3] = a3 === 0 ? 0 : ((w2 >>> 8) | (a3 << 24)) >>> 0;
      }
    }
    for (let i = quads * 4, j = quads * 12; i < pixels; i++, j += 3) {
      const a = alpha[i]!;
      words[i] =
        a === 0
          ? 0
          : le
            ? (rgb[j]! | (rgb[j + 1]! << 8) | (rgb[j + 2]! << 16) | (a << 24)) >>> 0
            : ((rgb[j]! << 24) | (rgb[j + 1]! << 16) | (rgb[j + 2]! << 8) | a) >>> 0;
    }
    return out;
  }
  const ba = background ? background.alpha : 0;
  for (let i = 0, j = 0, k = 0; i < pixels; i++, j += 3, k += 4) {
    const a = alpha[i]! / 255;
    // Porter-Duff "over": out alpha and colour (un-premultiplied).
    const outA = a + ba * (1 - a);
    if (outA <= 0) {
      out[k] = out[k + 1] = out[k + 2] = out[k + 3] = 0;
      continue;
    }
    if (!background) {
      out[k] = rgb[j]!;
      out[k + 1] = rgb[j + 1]!;
      out[k + 2] = rgb[j + 2]!;
    } else {
      const wb = (ba * (1 - a)) / outA;
      const wf = a / outA;
      out[k] = Math.round(rgb[j]! * wf + background.r * wb);
      out[k + 1] = Math.round(rgb[j + 1]! * wf + background.g * wb);
      out[k + 2] = Math.round(rgb[j + 2]! * wf + background.b * wb);
    }
    out[k + 3] = Math.round(outA * 255);
  }
  return out;
}

/**
 * Clears, in place, the colour of fully transparent pixels and returns `rgb`: joined with the
 * alpha, it is composeRgba's output without a background. A transparent run is cleared with
 * one fill.
 */
export function clearTransparent(rgb: Buffer, alpha: Buffer): Buffer {
  countKernel('clearTransparent');
  const words = alpha.byteOffset % 4 === 0 ? new Uint32Array(alpha.buffer, alpha.byteOffset, alpha.length >> 2) : undefined;
  const pixels = alpha.length;
  // indexOf finds the next transparent pixel natively (memchr); the run is then walked four
  // pixels at a time where aligned.
  for (let i = alpha.indexOf(0); i >= 0 && i < pixels; i = alpha.indexOf(0, i)) {
    let end = i + 1;
    while (end < pixels) {
      if (words && (end & 3) === 0 && end + 4 <= pixels && words[end >> 2] === 0) end += 4;
      else if (alpha[end] === 0) end++;
      else break;
    }
    rgb.fill(0, i * 3, end * 3);
    i = end;
  }
  return rgb;
}

/**
 * RGB of the cutout over an opaque background colour, into `out` (which may be `rgb` itself):
 * per channel `round(c * a/255 + bg * (1 - a/255))`. Opaque pixels keep their colour and
 * transparent ones take the background's (what the formula gives at a = 255 and a = 0), four at
 * a time where aligned: only soft pixels need the arithmetic.
 */
export function composeOpaque(rgb: Buffer, alpha: Buffer, background: Rgba, out: Buffer = Buffer.allocUnsafe(alpha.length * 3), options: { simd?: boolean } = {}): Buffer {
  countKernel('composeOpaque');
  // The same bytes in WebAssembly SIMD (render-compose.ts: integers, exact); `simd: false` keeps
  // to the JavaScript below (the reference).
  if (options.simd !== false && composeOpaqueSimd(rgb, alpha, background, out)) return out;
  const pixels = alpha.length;
  const bg = [background.r, background.g, background.b];
  const words = alpha.byteOffset % 4 === 0 ? new Uint32Array(alpha.buffer, alpha.byteOffset, alpha.length >> 2) : undefined;
  const fillBackground = (from: number, to: number) => {
    for (let j = from * 3; j < to * 3; j += 3) {
      out[j] = bg[0]!;
      out[j + 1] = bg[1]!;
      out[j + 2] = bg[2]!;
    }
  };
  for (let i = 0; i < pixels; i++) {
    if (words && (i & 3) === 0 && i + 4 <= pixels) {
      const word = words[i >> 2]!;
      if (word === 0xffffffff) {
        if (out !== rgb) rgb.copy(out, i * 3, i * 3, i * 3 + 12);
        i += 3;
        continue;
      }
      if (word === 0) {
        fillBackground(i, i + 4);
        i += 3;
        continue;
      }
    }
    const ai = alpha[i]!;
    const j = i * 3;
    if (ai === 255) {
      if (out !== rgb) rgb.copy(out, j, j, j + 3);
    } else if (ai === 0) {
      fillBackground(i, i + 1);
    } else {
      const a = ai / 255;
      for (let c = 0; c < 3; c++) out[j + c] = Math.round(rgb[j + c]! * a + bg[c]! * (1 - a));
    }
  }
  return out;
}

