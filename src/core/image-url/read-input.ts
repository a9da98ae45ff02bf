import type { Readable } from 'node:stream';
import { ApiError } from '../errors.js';
import type { IncomingHeaders } from '../http-types.js';
import { BACKGROUND_PART } from '../image/backdrop.js';
import { HINTS_FIELD, MAX_HINTS_BYTES } from '../image/hints.js';
import { flatJsonFields } from '../json-fields.js';
import { readUpload, type FormShape, type Upload, type UploadLimits } from '../multipart.js';
import { BodyReadError, readBody } from '../../util/read-body.js';
import { fetchImage, type ImageUrlRefusal } from './fetch-image.js';
import type { ResolvedImageUrlOptions } from './options.js';

export const IMAGE_URL_FIELD = 'image_url';

/**
 * The request's image: the multipart `file` part, or the image at `image_url` (a form field, or
 * a JSON body `{"image_url": ..., "format": ...}`), fetched with SSRF protection. Either way an
 * Upload, whose other fields are the output options.
 */
export async function readImageInput(
  body: Readable,
  headers: IncomingHeaders,
  limits: UploadLimits & { maxBackgroundBytes?: number },
  imageUrl: ResolvedImageUrlOptions & { onRefusal?: ((refusal: ImageUrlRefusal) => void) | undefined },
  signal: AbortSignal,
): Promise<Upload> {
  // Optional file parts beside the image: the background photo (pipeline/background-image.ts)
  // and the hints (image/hints.ts).
  const extraFiles: Record<string, number> = { [HINTS_FIELD]: MAX_HINTS_BYTES };
  if (limits.maxBackgroundBytes) extraFiles[BACKGROUND_PART] = limits.maxBackgroundBytes;
  const shape: FormShape = { fileAlternatives: imageUrl.enabled ? [IMAGE_URL_FIELD] : [], extraFiles };
  const json = imageUrl.enabled && /^application\/json\s*(;|$)/i.test(String(headers['content-type'] ?? ''));
  const upload = json ? await readJsonFields(body, headers, limits, signal) : await readUpload(body, headers, limits, signal, shape);
  const url = upload.fields[IMAGE_URL_FIELD];
  if (url === undefined) {
    if (json) throw new ApiError('missing_file', { detail: 'A JSON body needs "image_url".' });
    return upload;
  }
  if (upload.file.length > 0) throw new ApiError('file_and_image_url');
  const { [IMAGE_URL_FIELD]: _, ...fields } = upload.fields;
  const fetched = await fetchImage(url, { ...imageUrl, maxBytes: limits.maxFileBytes, signal });
  if (fetched.file.length === 0) throw new ApiError('missing_file', { detail: 'The image at image_url is empty.' });
  return { file: fetched.file, filename: fetched.filename, declaredType: fetched.declaredType, fields, ...(upload.parts ? { parts: upload.parts } : {}) };
}

/**
 * A small JSON object of strings, numbers and booleans, read within the form's field limits.
 * The request's signal ends it when the upload takes too long or the client leaves.
 */
export async function readJsonFields(body: Readable, headers: IncomingHeaders, limits: UploadLimits, signal: AbortSignal): Promise<Upload> {
  const maxBytes = 4096 + limits.maxFields * limits.maxFieldBytes;
  let raw: Buffer;
  try {
    raw = await readBody(body, { maxBytes, declaredLength: headers['content-length'] as string | undefined, signal });
  } catch (error) {
    throw asApiError(error, `A JSON body may be at most ${maxBytes} bytes.`);
  }
  // URLs (signed ones run long) are bounded by the body's size and their own 2048 characters, not maxFieldBytes.
  const fields = flatJsonFields(raw, limits, [IMAGE_URL_FIELD, 'bg_image_url']);
  return { file: Buffer.alloc(0), filename: '', declaredType: '', fields };
}

/** A failed read of the request's own body as the API answers it; the signal's reasons pass through. */
function asApiError(error: unknown, tooLargeDetail: string): unknown {
  if (!(error instanceof BodyReadError)) return error;
  switch (error.reason) {
    case 'already_read':
      return new ApiError('body_already_read', { detail: error.message });
    case 'too_large':
      return new ApiError('upload_too_large', { detail: tooLargeDetail });
    default:
      return new ApiError('malformed_json', { detail: 'The body could not be read.', cause: error });
  }
}
