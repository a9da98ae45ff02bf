import { ApiError } from '../errors.js';
import type { CoreRequest } from '../http-types.js';
import { BACKGROUND_PART } from '../image/backdrop.js';
import { HINTS_FIELD, MAX_HINTS_BYTES } from '../image/hints.js';
import { checkFieldLimits, flatJsonFields } from '../json-fields.js';
import { readUpload, type Upload, type UploadLimits } from '../multipart.js';
import { fetchImage, type ImageUrlRefusal } from '../image-url/fetch-image.js';
import type { ResolvedImageUrlOptions } from '../image-url/options.js';
import { BodyReadError, readBody } from '../../util/read-body.js';
import { mapParameters, SOURCE_FIELDS, type RemoveBgRequest } from './parameters.js';

/** Room around the image in a JSON or urlencoded body: the other parameters and the framing. */
const ENVELOPE_BYTES = 64 * 1024;

/** Base64 text of at most `bytes` bytes of data. */
export function base64Length(bytes: number): number {
  return 4 * Math.ceil(bytes / 3);
}

/** `data:image/png;base64,` in front of the data, which some clients send. */
const DATA_URL_PREFIX = /^data:[\w/+.-]*(;[\w=.-]+)*;base64,/i;
const BASE64 = /^[A-Za-z0-9+/_-]*={0,2}$/;

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
): Promise<Upload & { removeBg: RemoveBgRequest }> {
  const contentType = String(request.headers['content-type'] ?? '');
  const b64Max = base64Length(limits.maxFileBytes);
  let form: Upload;
  if (/^multipart\/form-data\s*;/i.test(contentType)) {
    form = await readUpload(request.body, request.headers, limits, signal, {
      fileField: 'image_file',
      fileAlternatives: ['image_file_b64', 'image_url'],
      largeField: { name: 'image_file_b64', maxBytes: b64Max + 1024 },
      // remove.bg's background photo as a file part: bgcut's `bg_image` (pipeline/background-image.ts);
      // bgcut's `hints` part (docs/api.md), an extension remove.bg does not have.
      extraFiles: { [HINTS_FIELD]: MAX_HINTS_BYTES, ...(limits.maxBackgroundBytes ? { bg_image_file: limits.maxBackgroundBytes } : {}) },
    });
  } else if (/^application\/json\s*(;|$)/i.test(contentType)) {
    form = { file: Buffer.alloc(0), filename: '', declaredType: '', fields: flatJsonFields(await readWhole(request, b64Max + ENVELOPE_BYTES, signal), limits, ['image_file_b64']) };
  } else if (/^application\/x-www-form-urlencoded\s*(;|$)/i.test(contentType)) {
    // Percent-encoding makes base64's `+` and `/` three characters each: room for a quarter more.
    const raw = await readWhole(request, Math.ceil(b64Max * 1.25) + ENVELOPE_BYTES, signal);
    form = { file: Buffer.alloc(0), filename: '', declaredType: '', fields: urlencodedFields(raw, limits) };
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
  else if (source === 'image_file_b64') image = { file: decodeBase64(form.fields.image_file_b64!, limits.maxFileBytes), filename: '', declaredType: '' };
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

function urlencodedFields(raw: Buffer, limits: UploadLimits): Record<string, string> {
  const fields: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const [name, value] of new URLSearchParams(raw.toString('latin1'))) {
    if (Object.hasOwn(fields, name) && fields[name] !== value) throw new ApiError('invalid_option', { detail: `${name.slice(0, 100)}: given twice with different values` });
    // Base64 sent without percent-encoding its `+` arrives as spaces, which base64 never holds.
    fields[name] = name === 'image_file_b64' ? value.replace(/ /g, '+') : Buffer.from(value, 'latin1').toString('utf8');
  }
  return checkFieldLimits(fields, limits, ['image_file_b64']);
}

/** The image in `image_file_b64` (standard or URL-safe base64, a data: URL prefix allowed), within the byte limit. */
export function decodeBase64(text: string, maxBytes: number): Buffer {
  const data = text.trim().replace(DATA_URL_PREFIX, '').replace(/\s+/g, '');
  if (!BASE64.test(data) || data.length % 4 === 1) throw new ApiError('malformed_base64');
  if (Math.floor((data.length * 3) / 4) - (data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0) > maxBytes) {
    throw new ApiError('upload_too_large', { detail: `The image is larger than ${maxBytes} bytes.` });
  }
  return Buffer.from(data, 'base64');
}
