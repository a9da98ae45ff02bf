import { ApiError } from '../errors.js';
import type { IncomingHeaders } from '../http-types.js';
import { readBatchUpload, type UploadLimits, type UploadedFile } from '../multipart.js';
import { MAX_URL_LENGTH } from '../image-url/options.js';
import { readJsonBody } from './read-json.js';
import type { Readable } from 'node:stream';

export const CALLBACK_FIELD = 'callback_url';
export const IMAGE_URLS_FIELD = 'image_urls';

/** A batch as the caller sent it: files or URLs, the output options, and where to call back. */
export interface Batch {
  files: UploadedFile[];
  urls: string[];
  fields: Record<string, string>;
  callbackUrl: string | undefined;
}

export interface BatchReadLimits extends UploadLimits {
  /** The plan's largest batch. */
  maxImages: number;
  /** All files together, in bytes. */
  maxTotalBytes: number;
}

/**
 * The images of `POST /v1/jobs`: several multipart parts named `file` (with the options as form
 * fields), or a JSON body `{"image_urls": [...], ...options}`. Either way at most the plan's
 * batch (400 `batch_too_large`) and at least one image (400 `batch_empty`); each file within the
 * upload limit, all of them within `maxTotalBytes`.
 */
export async function readBatch(body: Readable, headers: IncomingHeaders, limits: BatchReadLimits, signal: AbortSignal): Promise<Batch> {
  const json = /^application\/json\s*(;|$)/i.test(String(headers['content-type'] ?? ''));
  if (json) return readUrlBatch(body, headers, limits, signal);
  const upload = await readBatchUpload(body, headers, { ...limits, maxFiles: limits.maxImages }, signal).catch((error: unknown) => {
    if (error instanceof ApiError && error.code === 'too_many_files') throw tooMany(limits.maxImages);
    if (error instanceof ApiError && error.code === 'missing_file' && !/empty/.test(error.message)) throw new ApiError('batch_empty');
    throw error;
  });
  const { [CALLBACK_FIELD]: callbackUrl, ...fields } = upload.fields;
  return { files: upload.files, urls: [], fields, callbackUrl };
}

async function readUrlBatch(body: Readable, headers: IncomingHeaders, limits: BatchReadLimits, signal: AbortSignal): Promise<Batch> {
  // Room for the URLs besides the options.
  const maxBytes = 4096 + limits.maxFields * limits.maxFieldBytes + limits.maxImages * (MAX_URL_LENGTH + 8);
  const parsed = await readJsonBody(body, headers, maxBytes, signal);
  const { [IMAGE_URLS_FIELD]: urls, [CALLBACK_FIELD]: callbackUrl, ...options } = parsed;
  if (urls === undefined || (Array.isArray(urls) && urls.length === 0)) throw new ApiError('batch_empty');
  if (!Array.isArray(urls) || urls.some((url) => typeof url !== 'string')) throw new ApiError('malformed_json', { detail: '"image_urls" must be a list of URLs (strings).' });
  if (urls.length > limits.maxImages) throw tooMany(limits.maxImages);
  urls.forEach((url: string, n) => {
    if (url.length > MAX_URL_LENGTH) throw new ApiError('image_url_invalid', { detail: `image_urls[${n}] is longer than ${MAX_URL_LENGTH} characters.` });
    let parsedUrl: URL;
    try {
      parsedUrl = new URL(url);
    } catch {
      throw new ApiError('image_url_invalid', { detail: `image_urls[${n}] is not a URL.` });
    }
    if (parsedUrl.protocol !== 'http:' && parsedUrl.protocol !== 'https:') throw new ApiError('image_url_scheme_not_allowed');
  });
  if (callbackUrl !== undefined && typeof callbackUrl !== 'string') throw new ApiError('callback_url_refused');
  const fields: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const [name, value] of Object.entries(options)) {
    if (!['string', 'number', 'boolean'].includes(typeof value)) throw new ApiError('invalid_option', { detail: `${name.slice(0, 100)}: must be a string, number or boolean` });
    fields[name] = String(value);
  }
  if (Object.keys(fields).length > limits.maxFields) throw new ApiError('too_many_fields');
  return { files: [], urls: urls as string[], fields, callbackUrl };
}

function tooMany(max: number): ApiError {
  return new ApiError('batch_too_large', { detail: `The plan allows at most ${max} images in one job.` });
}
