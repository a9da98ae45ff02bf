import type { Readable } from 'node:stream';
import { ApiError } from '../errors.js';
import type { IncomingHeaders } from '../http-types.js';
import { BodyReadError, readBody } from '../../util/read-body.js';

/** A JSON object body of at most `maxBytes`, or a coded refusal. */
export async function readJsonBody(body: Readable, headers: IncomingHeaders, maxBytes: number, signal: AbortSignal): Promise<Record<string, unknown>> {
  let raw: Buffer;
  try {
    raw = await readBody(body, { maxBytes, declaredLength: headers['content-length'] as string | undefined, signal });
  } catch (error) {
    if (!(error instanceof BodyReadError)) throw error;
    if (error.reason === 'already_read') throw new ApiError('body_already_read', { detail: error.message });
    if (error.reason === 'too_large') throw new ApiError('upload_too_large', { detail: `A JSON body may be at most ${maxBytes} bytes.` });
    throw new ApiError('malformed_json', { detail: 'The body could not be read.', cause: error });
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw.toString('utf8'));
  } catch {
    throw new ApiError('malformed_json', { detail: 'The body is not valid JSON.' });
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new ApiError('malformed_json', { detail: 'The body must be a JSON object.' });
  return parsed as Record<string, unknown>;
}
