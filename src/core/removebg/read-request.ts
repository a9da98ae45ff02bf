import { ApiError } from '../errors.js';
import type { CoreRequest } from '../http-types.js';
import { BACKGROUND_PART } from '../image/backdrop.js';
import { HINTS_FIELD, MAX_HINTS_BYTES } from '../image/hints.js';
import { readUpload, type Upload, type UploadLimits } from '../multipart.js';
import { fetchImage, type ImageUrlRefusal } from '../image-url/fetch-image.js';
import type { ResolvedImageUrlOptions } from '../image-url/options.js';
import { BodyReadError, readBody } from '../../util/read-body.js';
import type { PixelPool } from '../image/pixel-pool.js';
import { readBodyFields, type BodyFields, type BodyKind } from './body-fields.js';
import { mapParameters, SOURCE_FIELDS, type RemoveBgRequest } from './parameters.js';

/** Room around the image in a JSON or urlencoded body: the other parameters and the framing. */
const ENVELOPE_BYTES = 64 * 1024;

/** Base64 text of at most `bytes` bytes of data. */
export function base64Length(bytes: number): number {
  return 4 * Math.ceil(bytes / 3);
}

import { decodeBase64, decodeBase64Bytes } from './body-fields.js';
export { decodeBase64 };

/**
 * A JSON or urlencoded body at least this large is parsed, and its base64 decoded, in the pixel
 * pool (body-fields.ts): below it, the worker's round trip costs more than the work.
 */
export const BODY_IN_POOL_BYTES = 64 * 1024;

export type ImageUrlDeps = ResolvedImageUrlOptions & { onRefusal?: ((refusal: ImageUrlRefusal) => void) | undefined };

/**
 * Step 2a of `POST /v1.0/removebg`: remove.bg's request as it documents it, in any of its three
 * bodies, read within the same limits as bgcut's own: `multipart/form-data` (the image in the
 * file part `image_file`, or `image_file_b64` / `image_url` as fields), `application/json` or
 * `application/x-www-form-urlencoded` (one of `image_file_b64` or `image_url`). Every other field
 * is a remove.bg parameter, mapped onto bgcut's options (parameters.ts). The Upload's fields are
 * bgcut's, so the core checks them as it checks its own.
 */
export async function readRemoveBgRequest(
  request: CoreRequest,
  limits: UploadLimits & { maxBackgroundBytes?: number },
  imageUrl: ImageUrlDeps,
  signal: AbortSignal,
  pool?: PixelPool,
): Promise<Upload & { removeBg: RemoveBgRequest }> {
  const contentType = String(request.headers['content-type'] ?? '');
  const b64Max = base64Length(limits.maxFileBytes);
  let form: Upload;
  // JSON and urlencoded bodies: the image's base64 comes decoded (or its decode's error) beside the fields.
  let decoded: BodyFields['image'];
  if (/^multipart\/form-data\s*;/i.test(contentType)) {
    form = await readUpload(request.body, request.headers, limits, signal, {
      fileField: 'image_file',
      fileAlternatives: ['image_file_b64', 'image_url'],
      largeField: { name: 'image_file_b64', maxBytes: b64Max + 1024 },
      // remove.bg's background photo as a file part: bgcut's `bg_image` (pipeline/background-image.ts);
      // bgcut's `hints` part (docs/api.md), an extension remove.bg does not have.
      extraFiles: { [HINTS_FIELD]: MAX_HINTS_BYTES, ...(limits.maxBackgroundBytes ? { bg_image_file: limits.maxBackgroundBytes } : {}) },
    });
  } else if (/^application\/json\s*(;|$)/i.test(contentType) || /^application\/x-www-form-urlencoded\s*(;|$)/i.test(contentType)) {
    const kind: BodyKind = /^application\/json/i.test(contentType) ? 'json' : 'urlencoded';
    // Percent-encoding makes base64's `+` and `/` three characters each: room for a quarter more.
    const raw = await readWhole(request, (kind === 'json' ? b64Max : Math.ceil(b64Max * 1.25)) + ENVELOPE_BYTES, signal);
    const read = pool && raw.length >= BODY_IN_POOL_BYTES ? await pool.removeBgBody(raw, kind, limits) : readBodyFields(raw, kind, limits);
    decoded = read.image;
    form = { file: Buffer.alloc(0), filename: '', declaredType: '', fields: read.fields };
  } else {
    throw new ApiError('not_multipart', {
      detail: 'Send remove.bg\'s request as multipart/form-data (image_file, image_file_b64 or image_url), application/json or application/x-www-form-urlencoded (image_file_b64 or image_url).',
    });
  }

  const given = new Map(Object.entries(form.fields));
  const sources = SOURCE_FIELDS.filter((name) => (name === 'image_file' ? form.file.length > 0 : given.has(name) && given.get(name) !== ''));
  if (sources.length === 0) throw new ApiError('missing_file', { detail: 'Send the image as image_file, image_file_b64 or image_url.' });
  if (sources.length > 1) throw new ApiError('file_and_image_url', { detail: `Send one of image_file, image_file_b64 or image_url, not ${sources.join(' and ')}.` });
  for (const name of SOURCE_FIELDS) given.delete(name);
  // Mapped before any image is fetched or decoded: a bad parameter costs nothing.
  const removeBg = mapParameters(given, Boolean(form.parts?.bg_image_file));

  const source = sources[0]!;
  let image: { file: Buffer; filename: string; declaredType: string };
  if (source === 'image_file') image = form;
  else if (source === 'image_file_b64') image = { file: await base64Image(form, decoded, limits.maxFileBytes, pool), filename: '', declaredType: '' };
  else {
    if (!imageUrl.enabled) throw new ApiError('invalid_option', { detail: 'image_url: this server does not fetch images by URL; send image_file or image_file_b64.' });
    image = await fetchImage(form.fields.image_url!, { ...imageUrl, maxBytes: limits.maxFileBytes, signal });
  }
  if (image.file.length === 0) throw new ApiError('missing_file', { detail: `The image in ${source} is empty.` });
  // remove.bg's bg_image_file is bgcut's bg_image; hints keep their name.
  const parts: NonNullable<Upload['parts']> = {};
  if (form.parts?.bg_image_file) parts[BACKGROUND_PART] = form.parts.bg_image_file;
  if (form.parts?.[HINTS_FIELD]) parts[HINTS_FIELD] = form.parts[HINTS_FIELD];
  return { file: image.file, filename: image.filename, declaredType: image.declaredType, fields: removeBg.fields, removeBg, ...(Object.keys(parts).length > 0 ? { parts } : {}) };
}

async function readWhole(request: CoreRequest, maxBytes: number, signal: AbortSignal): Promise<Buffer> {
  try {
    return await readBody(request.body, { maxBytes, declaredLength: request.headers['content-length'] as string | undefined, signal });
  } catch (error) {
    if (!(error instanceof BodyReadError)) throw error;
    if (error.reason === 'already_read') throw new ApiError('body_already_read', { detail: error.message });
    if (error.reason === 'too_large') throw new ApiError('upload_too_large', { detail: `The body is larger than ${maxBytes} bytes.` });
    throw new ApiError('malformed_json', { detail: 'The body could not be read.', cause: error });
  }
}

/**
 * The image in image_file_b64: decoded with the body's fields (JSON, urlencoded); a multipart
 * field's, streamed as bytes (multipart.ts's largeFieldBytes), decoded in the pixel pool when
 * large, like a JSON body's (the same decode, the same errors); else here.
 */
async function base64Image(form: Upload, decoded: BodyFields['image'], maxBytes: number, pool: PixelPool | undefined): Promise<Buffer> {
  if (decoded) {
    if ('error' in decoded) throw decoded.error;
    return decoded.bytes;
  }
  const streamed = form.largeFieldBytes;
  if (!streamed) return decodeBase64(form.fields.image_file_b64!, maxBytes);
  if (pool && streamed.length >= BODY_IN_POOL_BYTES) return pool.decodeBase64(streamed, maxBytes);
  return decodeBase64Bytes(streamed, maxBytes);
}
