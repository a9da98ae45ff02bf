/**
 * Every refusal the API gives, with its HTTP status. The `code` is stable: clients branch on it,
 * so a code is never renamed or reused for another condition.
 */
export const ERROR_CATALOG = {
  // 401: the caller is not identified.
  multiple_api_keys: { status: 401, title: 'More than one API key', detail: 'Send exactly one X-API-KEY header.' },
  missing_api_key: { status: 401, title: 'API key missing', detail: 'Send your API key in the X-API-KEY header.' },
  malformed_api_key: { status: 401, title: 'API key malformed', detail: 'The X-API-KEY header does not hold a well-formed API key.' },
  invalid_api_key: { status: 401, title: 'API key invalid', detail: 'The API key is not known.' },
  expired_api_key: { status: 401, title: 'API key expired', detail: 'The API key has expired.' },
  revoked_api_key: { status: 401, title: 'API key revoked', detail: 'The API key has been revoked.' },
  api_key_wrong_header: {
    status: 401,
    title: 'API key in the wrong place',
    detail: 'Send the API key in the X-API-KEY header, not in Authorization, another header or the query string.',
  },
  // 403: identified, but refused.
  account_suspended: { status: 403, title: 'Account suspended', detail: 'The account this key belongs to is suspended.' },
  ip_not_allowed: { status: 403, title: 'Address not allowed', detail: 'This API key may not be used from this address.' },
  origin_not_allowed: { status: 403, title: 'Origin not allowed', detail: 'This API key may not be used from this origin.' },
  plan_image_too_large: { status: 403, title: 'Image too large for the plan', detail: 'The image has more pixels than the plan allows.' },
  option_not_in_plan: { status: 403, title: 'Option not in the plan', detail: 'The plan does not include a requested option.' },
  // 429: over a limit of the plan.
  rate_limited: { status: 429, title: 'Rate limit exceeded', detail: "The account's per-minute request limit is used up." },
  quota_exceeded: { status: 429, title: 'Monthly quota exceeded', detail: "The account's monthly quota is used up." },
  concurrency_limited: { status: 429, title: 'Too many requests in progress', detail: 'The account has as many requests in progress as its plan allows.' },
  // Idempotency-Key (see docs/limits.md).
  invalid_idempotency_key: { status: 400, title: 'Invalid Idempotency-Key', detail: 'The Idempotency-Key header must be 1 to 255 visible ASCII characters.' },
  idempotency_key_in_use: {
    status: 409,
    title: 'Request with this Idempotency-Key in progress',
    detail: 'A request with this Idempotency-Key is still in progress. Retry after the time in Retry-After to get its answer.',
  },
  idempotency_result_gone: {
    status: 409,
    title: 'Result no longer kept',
    detail: 'The request with this Idempotency-Key was completed and charged, but its result is no longer kept. Use a new key for a new request.',
  },
  idempotency_key_reused: {
    status: 422,
    title: 'Idempotency-Key reused',
    detail: 'This Idempotency-Key was used for a different request. Use a new key for a new request.',
  },
  // The request itself.
  not_found: { status: 404, title: 'Not found', detail: 'No such endpoint.' },
  // Only from the host app around bgcut (the examples' error handlers): a request its own parts refused.
  bad_request: { status: 400, title: 'Bad request', detail: 'The request could not be read.' },
  method_not_allowed: { status: 405, title: 'Method not allowed', detail: 'Use POST.' },
  not_multipart: {
    status: 415,
    title: 'Body is not multipart/form-data',
    detail: 'Send the image as the part named "file" of a multipart/form-data body, or its URL as "image_url" in a form or a JSON body.',
  },
  invalid_option: { status: 400, title: 'Invalid option', detail: 'An output option is unknown or invalid.' },
  malformed_multipart: { status: 400, title: 'Malformed multipart body', detail: 'The multipart/form-data body could not be parsed.' },
  missing_file: { status: 400, title: 'File part missing', detail: 'The form has no part named "file" with an image.' },
  too_many_files: { status: 400, title: 'Too many files', detail: 'Send exactly one file, in the part named "file".' },
  unexpected_file_field: { status: 400, title: 'Unexpected file part', detail: 'The image must be sent in the part named "file".' },
  too_many_fields: { status: 400, title: 'Too many form fields', detail: 'The form has more fields than allowed.' },
  field_too_large: { status: 400, title: 'Form field too large', detail: 'A form field is longer than allowed.' },
  upload_too_large: { status: 413, title: 'Upload too large', detail: 'The upload is larger than allowed.' },
  upload_timeout: { status: 408, title: 'Upload too slow', detail: 'The upload did not complete in time.' },
  unsupported_image_type: {
    status: 415,
    title: 'Unsupported image type',
    detail: 'The file is not an image in a supported format (JPEG, PNG, WebP, AVIF, TIFF, GIF).',
  },
  invalid_hints: { status: 400, title: 'Invalid hints', detail: 'The hints part is not an image bgcut reads, or has too many pixels.' },
  hints_size_mismatch: { status: 400, title: 'Hints do not fit the image', detail: "The hints image does not have the image's aspect ratio (as displayed, EXIF orientation applied)." },
  corrupt_image: { status: 422, title: 'Corrupt image', detail: 'The image is truncated or corrupt and could not be decoded.' },
  image_too_large: { status: 413, title: 'Image too large', detail: 'The image has more pixels than allowed.' },
  // image_url: one code, and one fixed detail, per class of refusal (see src/core/image-url/):
  // a caller learns nothing about the network behind the API (which names resolve, which
  // addresses are private, which ports answer); the specifics go to onInternalError.
  malformed_json: { status: 400, title: 'Malformed JSON body', detail: 'The body is not a JSON object.' },
  malformed_base64: { status: 400, title: 'Malformed base64 image', detail: 'image_file_b64 is not base64-encoded image data.' },
  unknown_foreground: {
    status: 400,
    title: 'Could not identify foreground in image',
    detail: 'No object was found in front of a background (remove.bg\'s `unknown_foreground`); nothing was charged.',
  },
  bg_image_invalid: { status: 400, title: 'Invalid background image', detail: 'The background image (bg_image or bg_image_url) is not an image that can be decoded (JPEG, PNG, WebP, AVIF, TIFF or GIF).' },
  bg_image_too_large: { status: 400, title: 'Background image too large', detail: 'The background image has more pixels than this API takes.' },
  bg_image_and_url: { status: 400, title: 'Both bg_image and bg_image_url', detail: 'Send the background as the part "bg_image" or as "bg_image_url", not both.' },
  file_and_image_url: { status: 400, title: 'Both file and image_url', detail: 'Send the image as the part "file" or as "image_url", not both.' },
  image_url_invalid: { status: 400, title: 'Invalid image URL', detail: 'image_url is not a usable URL.' },
  image_url_scheme_not_allowed: {
    status: 400,
    title: 'Image URL scheme not allowed',
    detail: 'Only http and https URLs are fetched, and a redirect from https is only followed to https.',
  },
  image_url_host_not_allowed: { status: 403, title: 'Image host not allowed', detail: "The image URL's host is not on this API's list of image hosts." },
  image_url_port_not_allowed: { status: 403, title: 'Image port not allowed', detail: "The image URL's port is not one this API fetches from (by default 80 and 443)." },
  image_url_unreachable: {
    status: 422,
    title: 'Image server unreachable',
    detail: "The image URL's server could not be reached: its name did not resolve, its address is not a public one, or it refused or dropped the connection.",
  },
  image_url_http_error: { status: 422, title: 'Image server error', detail: "The image URL's server did not answer with the image (a status other than 2xx)." },
  image_url_too_many_redirects: { status: 422, title: 'Too many redirects', detail: 'The image URL redirects more than 3 times.' },
  image_url_too_large: { status: 413, title: 'Image at URL too large', detail: 'The image at the URL is larger than the upload limit.' },
  image_url_timeout: { status: 408, title: 'Image URL too slow', detail: 'The image at the URL did not arrive in time.' },
  // Jobs (POST /v1/jobs and below; see docs/jobs.md).
  batch_empty: { status: 400, title: 'Empty batch', detail: 'A job needs at least one image: "file" parts, or "image_urls" in a JSON body.' },
  batch_too_large: { status: 400, title: 'Too many images', detail: 'The batch has more images than the plan allows in one job.' },
  job_not_found: { status: 404, title: 'Job not found', detail: 'No job with this id belongs to this account.' },
  result_not_ready: { status: 409, title: 'Result not ready', detail: 'This image has no result: it has not finished, or it failed (see the job\'s status).' },
  results_expired: { status: 410, title: 'Results expired', detail: "The job's results were kept for the time its plan allows, and are gone." },
  callback_url_refused: {
    status: 422,
    title: 'Callback URL refused',
    detail: 'callback_url must be an http(s) URL of a public server on an allowed port (the same rules as image_url).',
  },
  webhook_secret_missing: {
    status: 409,
    title: 'No webhook signing secret',
    detail: 'Make a webhook signing secret in the dashboard before asking for a callback.',
  },
  // Only in logs and metrics: nobody is left to receive it (nginx's 499).
  client_closed: { status: 499, title: 'Client closed request', detail: 'The client went away before the answer was ready.' },
  // The service.
  inference_unavailable: {
    status: 503,
    title: 'Inference unavailable',
    detail: 'The inference server cannot be reached or is busy. Retry after the time in Retry-After.',
  },
  inference_timeout: { status: 504, title: 'Inference timed out', detail: 'The inference server did not answer in time.' },
  server_busy: { status: 503, title: 'Server busy', detail: 'This server has as many requests in progress as it takes. Retry after the time in Retry-After.' },
  service_unavailable: { status: 503, title: 'Service unavailable', detail: 'A backing service is unavailable.' },
  api_key_misconfigured: {
    status: 500,
    title: 'API key misconfigured',
    detail: "The API key's stored settings are not valid (for example its IP allow-list); its owner must replace the key.",
  },
  body_already_read: {
    status: 500,
    title: 'Body already read',
    detail: "The request body was consumed before bgcut got it (a body parser mounted ahead of bgcut's routes); the operator must mount bgcut first.",
  },
  internal_error: { status: 500, title: 'Internal error', detail: 'Something went wrong on our side.' },
} as const satisfies Record<string, { status: number; title: string; detail: string }>;

export type ErrorCode = keyof typeof ERROR_CATALOG;

/** An expected refusal, answered as application/problem+json (RFC 9457). */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  readonly status: number;
  readonly headers: Record<string, string>;

  constructor(
    readonly code: ErrorCode,
    options: { detail?: string; headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    super(options.detail ?? ERROR_CATALOG[code].detail, { cause: options.cause });
    this.status = ERROR_CATALOG[code].status;
    this.headers = options.headers ?? {};
  }
}

export interface ProblemDetails {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: ErrorCode;
  instance?: string;
}

/** Problem `type` URIs are this prefix plus the code; override with the handler's `problemTypeBase`. */
export const DEFAULT_PROBLEM_TYPE_BASE = 'urn:bgcut:problem:';

export function problemOf(error: ApiError, typeBase = DEFAULT_PROBLEM_TYPE_BASE, instance?: string): ProblemDetails {
  return {
    type: `${typeBase}${error.code}`,
    title: ERROR_CATALOG[error.code].title,
    status: error.status,
    detail: error.message,
    code: error.code,
    ...(instance ? { instance } : {}),
  };
}
