import { ApiError } from '../errors.js';
import { fetchImage } from '../image-url/fetch-image.js';
import { BACKGROUND_PART } from '../image/backdrop.js';
import { probeImage } from '../image/pipeline.js';
import type { Upload } from '../multipart.js';
import { checkBackgroundImageOptions, type OutputOptions } from '../output-options.js';
import type { OrderDeps } from './order.js';


export interface BackgroundLimits {
  /** Largest background image, in bytes (the part, or what bg_image_url answers). */
  maxBytes: number;
  /** Largest background image, in pixels, from its header. */
  maxPixels: number;
}

/**
 * Step 2b: the background image, if the request has one: the `bg_image` part, or the photo at
 * `bg_image_url`, fetched like `image_url` (the same address policy, resolver, redirects and
 * time limit; its own byte limit). Checked from its header only: the pixels are decoded in the
 * render worker. Its answers are its own codes (`bg_image_invalid`, `bg_image_too_large`), so a
 * client knows which of its two images is at fault.
 */
export async function readBackgroundImage(
  upload: Upload,
  options: OutputOptions,
  imageUrl: OrderDeps['imageUrl'],
  limits: BackgroundLimits,
  signal: AbortSignal,
): Promise<Buffer | undefined> {
  const part = upload.parts?.[BACKGROUND_PART];
  if (part && options.bgImageUrl) throw new ApiError('bg_image_and_url');
  let bytes: Buffer;
  if (part) {
    checkBackgroundImageOptions(options, BACKGROUND_PART);
    bytes = part.file;
  } else if (options.bgImageUrl) {
    if (!imageUrl.enabled) throw new ApiError('invalid_option', { detail: 'bg_image_url: this server does not fetch images by URL; send the part bg_image.' });
    bytes = (await fetchImage(options.bgImageUrl, { ...imageUrl, maxBytes: limits.maxBytes, signal })).file;
  } else {
    return undefined;
  }
  if (bytes.length === 0) throw new ApiError('bg_image_invalid', { detail: 'The background image is empty.' });
  try {
    await probeImage(bytes, { maxInputPixels: limits.maxPixels });
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    if (error.code === 'image_too_large') throw new ApiError('bg_image_too_large', { detail: `The background image is too large: ${error.message.replace(/^The image is /, '')}` });
    throw new ApiError('bg_image_invalid', { detail: `The background image: ${error.message}` });
  }
  return bytes;
}
