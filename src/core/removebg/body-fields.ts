import { ApiError } from '../errors.js';
import { countKernel } from '../image/kernel-calls.js';
import { checkFieldLimits, flatJsonFields } from '../json-fields.js';
import type { UploadLimits } from '../multipart.js';

/**
 * remove.bg's JSON and urlencoded bodies, read into fields and the image in `image_file_b64`:
 * the body's parse and the base64 decode, whose cost grows with the image. Run by the pixel
 * pool's worker (pixel-worker.ts's removeBgBody) for a large body, so neither blocks the host's
 * event loop (a 25 MiB image: about 60 ms of JSON.parse and 90 ms of decoding); a small body is
 * read where it is (read-request.ts). Pure: the same answers, thrown as the same ApiErrors, in
 * either thread.
 */
export type BodyKind = 'json' | 'urlencoded';

/** `data:image/png;base64,` in front of the data, which some clients send. */
const DATA_URL_PREFIX = /^data:[\w/+.-]*(;[\w=.-]+)*;base64,/i;
const BASE64 = /^[A-Za-z0-9+/_-]*={0,2}$/;

/**
 * The body's fields, the image's base64 replaced by a stand-in of the same emptiness (the request
 * checks which source was given before it decodes), and the decoded image or the ApiError its
 * decode raised, thrown by the caller only once the parameters have been mapped, as before.
 */
export interface BodyFields {
  fields: Record<string, string>;
  image?: { bytes: Buffer } | { error: ApiError };
}

/** Parse errors (malformed_json, invalid_option, too_many_fields, field_too_large) are thrown. */
export function readBodyFields(raw: Buffer, kind: BodyKind, limits: UploadLimits): BodyFields {
  countKernel('removeBgBodyParse');
  const fields = kind === 'json' ? flatJsonFields(raw, limits, ['image_file_b64']) : urlencodedFields(raw, limits);
  const b64 = fields.image_file_b64;
  if (b64 === undefined || b64 === '') return { fields };
  // The stand-in keeps the text out of what goes back to the main thread.
  fields.image_file_b64 = 'b64';
  try {
    return { fields, image: { bytes: decodeBase64(b64, limits.maxFileBytes) } };
  } catch (error) {
    if (error instanceof ApiError) return { fields, image: { error } };
    throw error;
  }
}

export function urlencodedFields(raw: Buffer, limits: UploadLimits): Record<string, string> {
  const fields: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const [name, value] of new URLSearchParams(raw.toString('latin1'))) {
    if (Object.hasOwn(fields, name) && fields[name] !== value) throw new ApiError('invalid_option', { detail: `${name.slice(0, 100)}: given twice with different values` });
    // Base64 sent without percent-encoding its `+` arrives as spaces, which base64 never holds.
    fields[name] = name === 'image_file_b64' ? value.replace(/ /g, '+') : Buffer.from(value, 'latin1').toString('utf8');
  }
  return checkFieldLimits(fields, limits, ['image_file_b64']);
}

/**
 * The image in `image_file_b64` (standard or URL-safe base64, a data: URL prefix allowed), within
 * the byte limit, decoded into memory of its own (movable from a worker without a copy).
 */
export function decodeBase64(text: string, maxBytes: number): Buffer {
  countKernel('base64Decode');
  const data = text.trim().replace(DATA_URL_PREFIX, '').replace(/\s+/g, '');
  if (!BASE64.test(data) || data.length % 4 === 1) throw new ApiError('malformed_base64');
  const bytes = Math.floor((data.length * 3) / 4) - (data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0);
  if (bytes > maxBytes) throw new ApiError('upload_too_large', { detail: `The image is larger than ${maxBytes} bytes.` });
  const out = Buffer.from(new ArrayBuffer(bytes));
  const written = out.write(data, 'base64');
  return written === bytes ? out : out.subarray(0, written);
}

/**
 * decodeBase64 of a multipart field's text given as its bytes (multipart.ts streams remove.bg's
 * image_file_b64): read as UTF-8, busboy's charset for a field that names none, so the same text
 * gives the same answers as the field's string did.
 */
export function decodeBase64Bytes(text: Uint8Array, maxBytes: number): Buffer {
  return decodeBase64(Buffer.from(text.buffer, text.byteOffset, text.byteLength).toString('utf8'), maxBytes);
}
