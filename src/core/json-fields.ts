import { ApiError } from './errors.js';
import type { UploadLimits } from './multipart.js';

/**
 * A request body's flat JSON object (strings, numbers and booleans; null: left out) as form
 * fields, within the same limits as a multipart form's: at most `maxFields` fields beside the
 * image's own (`image_url`, `image_file_b64`), each but the `large` ones (a base64 image, a long
 * signed URL: bounded by the body's size and their own checks) at most `maxFieldBytes`.
 * bgcut's JSON body and remove.bg's read it alike.
 */
export function flatJsonFields(raw: Buffer, limits: UploadLimits, large: readonly string[] = []): Record<string, string> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw.toString('utf8'));
  } catch {
    throw new ApiError('malformed_json', { detail: 'The body is not valid JSON.' });
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new ApiError('malformed_json', { detail: 'The body must be a JSON object.' });
  // No prototype: a field named `__proto__` is kept (and refused as an unknown option).
  const fields: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const [name, value] of Object.entries(parsed)) {
    if (value === null) continue;
    if (!['string', 'number', 'boolean'].includes(typeof value)) throw new ApiError('invalid_option', { detail: `${name.slice(0, 100)}: must be a string, number or boolean` });
    fields[name] = String(value);
  }
  return checkFieldLimits(fields, limits, large);
}

/** Every field but the `large` ones within the field size limit, and no more fields than multipart allows beside its file. */
export function checkFieldLimits(fields: Record<string, string>, limits: UploadLimits, large: readonly string[] = []): Record<string, string> {
  const names = Object.keys(fields);
  if (names.length > limits.maxFields + 1) throw new ApiError('too_many_fields');
  for (const name of names) {
    if (!large.includes(name) && Buffer.byteLength(fields[name]!) > limits.maxFieldBytes) {
      throw new ApiError('field_too_large', { detail: `The field "${name.slice(0, 100)}" is longer than ${limits.maxFieldBytes} bytes.` });
    }
  }
  return fields;
}
