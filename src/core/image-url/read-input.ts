import type { Readable } from 'node:stream';
import { ApiError } from '../errors.js';
import type { IncomingHeaders } from '../http-types.js';
import { readUpload, type Upload, type UploadLimits } from '../multipart.js';
import { fetchImage } from './fetch-image.js';
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
  limits: UploadLimits,
  imageUrl: ResolvedImageUrlOptions,
  signal: AbortSignal,
): Promise<Upload> {
  const json = imageUrl.enabled && /^application\/json\s*(;|$)/i.test(String(headers['content-type'] ?? ''));
  const upload = json ? await readJsonFields(body, headers, limits, signal) : await readUpload(body, headers, limits, signal, imageUrl.enabled ? IMAGE_URL_FIELD : undefined);
  const url = upload.fields[IMAGE_URL_FIELD];
  if (url === undefined) {
    if (json) throw new ApiError('missing_file', { detail: 'A JSON body needs "image_url".' });
    return upload;
  }
  if (upload.file.length > 0) throw new ApiError('file_and_image_url');
  const { [IMAGE_URL_FIELD]: _, ...fields } = upload.fields;
  const fetched = await fetchImage(url, { ...imageUrl, maxBytes: limits.maxFileBytes, signal });
  if (fetched.file.length === 0) throw new ApiError('missing_file', { detail: 'The image at image_url is empty.' });
  return { file: fetched.file, filename: fetched.filename, declaredType: fetched.declaredType, fields };
}

/**
 * A small JSON object of strings, numbers and booleans, read within the form's field limits.
 * The request's signal ends it when the upload takes too long or the client leaves.
 */
async function readJsonFields(body: Readable, headers: IncomingHeaders, limits: UploadLimits, signal: AbortSignal): Promise<Upload> {
  const maxBytes = 4096 + limits.maxFields * limits.maxFieldBytes;
  if (Number(headers['content-length']) > maxBytes) throw new ApiError('upload_too_large', { detail: `A JSON body may be at most ${maxBytes} bytes.` });
  // Never wait for a body someone else has read: it would never end.
  if (body.readableEnded) throw new ApiError('malformed_json', { detail: 'The body was already read before bgcut got it (a body parser ahead of it?).' });
  const raw = await new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onAbort = () => finish(signal.reason);
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) finish(new ApiError('upload_too_large', { detail: `A JSON body may be at most ${maxBytes} bytes.` }));
      else chunks.push(chunk);
    };
    const onEnd = () => finish();
    const onError = (error: Error) => finish(new ApiError('malformed_json', { detail: 'The body could not be read.', cause: error }));
    function finish(error?: unknown): void {
      signal.removeEventListener('abort', onAbort);
      body.off('data', onData).off('end', onEnd).off('error', onError);
      if (error) reject(error);
      else resolve(Buffer.concat(chunks));
    }
    if (signal.aborted) return finish(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    body.on('data', onData).on('end', onEnd).on('error', onError);
  });
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw.toString('utf8'));
  } catch {
    throw new ApiError('malformed_json', { detail: 'The body is not valid JSON.' });
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new ApiError('malformed_json', { detail: 'The body must be a JSON object.' });
  const fields: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const [name, value] of Object.entries(parsed)) {
    if (!['string', 'number', 'boolean'].includes(typeof value)) throw new ApiError('invalid_option', { detail: `${name.slice(0, 100)}: must be a string, number or boolean` });
    fields[name] = String(value);
  }
  if (Object.keys(fields).length > limits.maxFields) throw new ApiError('too_many_fields');
  return { file: Buffer.alloc(0), filename: '', declaredType: '', fields };
}
