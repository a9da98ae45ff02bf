import { ERROR_CATALOG, type ErrorCode } from '../core/errors.js';
import { FORMATS } from '../core/image/output.js';
import type { JsonObject } from './document.js';

/** Codes only the jobs routes answer with. */
export const JOB_ONLY_CODES: ErrorCode[] = ['batch_empty', 'batch_too_large', 'job_not_found', 'result_not_ready', 'results_expired', 'callback_url_refused', 'webhook_secret_missing'];

const IDENTIFIED_READ: ErrorCode[] = [
  ...(Object.keys(ERROR_CATALOG) as ErrorCode[]).filter((code) => ERROR_CATALOG[code].status === 401),
  'account_suspended',
  'ip_not_allowed',
  'origin_not_allowed',
  'method_not_allowed',
  'job_not_found',
  'service_unavailable',
  'internal_error',
];

/** What each jobs operation may answer, given the codes `POST /v1/remove-bg` may (a job is accepted like one). */
export function jobOperationCodes(removeBackground: ErrorCode[]) {
  const perImage = new Set<ErrorCode>(['unsupported_image_type', 'corrupt_image', 'image_too_large', 'plan_image_too_large', 'quota_exceeded', 'inference_timeout', 'file_and_image_url', 'missing_file']);
  return {
    createJob: [...removeBackground.filter((code) => !perImage.has(code) && !JOB_ONLY_CODES.includes(code)), 'missing_file', 'batch_empty', 'batch_too_large', 'callback_url_refused', 'webhook_secret_missing'] as ErrorCode[],
    getJob: IDENTIFIED_READ,
    cancelJob: IDENTIFIED_READ,
    getJobResults: [...IDENTIFIED_READ, 'result_not_ready', 'results_expired'] as ErrorCode[],
    getJobResult: [...IDENTIFIED_READ, 'not_found', 'result_not_ready', 'results_expired'] as ErrorCode[],
  };
}

const jobId = { name: 'id', in: 'path', required: true, description: 'The id `POST /v1/jobs` answered.', schema: { type: 'string', format: 'uuid' } };

/** `/v1/jobs` and below, for the OpenAPI document; `problems` builds the error responses, `options` are the output options' schemas. */
export function jobPaths(options: JsonObject, problems: (codes: ErrorCode[]) => JsonObject, codes: ReturnType<typeof jobOperationCodes>, rateHeaders: JsonObject): JsonObject {
  const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
  return {
    '/v1/jobs': {
      post: {
        operationId: 'createJob',
        summary: 'Start an asynchronous job over a batch of images',
        description:
          'Several `file` parts (multipart), or a JSON body with `image_urls`, with the same options as `/v1/remove-bg` for every image, and an optional ' +
          '`callback_url` that gets signed Standard Webhooks events (`job.started`, `job.completed`). Answered at once with `202` and the job\'s id; each image is ' +
          'charged when it is done. The plan sets the largest batch and how long results are kept. `Idempotency-Key` makes a retry get the same job.',
        parameters: [{ name: 'Idempotency-Key', in: 'header', required: false, description: 'As for `/v1/remove-bg`: a retry with the same key and batch gets the same job.', schema: { type: 'string', minLength: 1, maxLength: 255 } }],
        requestBody: {
          required: true,
          content: {
            'multipart/form-data': {
              schema: {
                type: 'object',
                required: ['file'],
                properties: {
                  file: { type: 'array', items: { type: 'string', format: 'binary' }, description: 'One part named `file` per image.' },
                  callback_url: { type: 'string', format: 'uri', description: 'Where the job\'s events are POSTed (public http(s) address; the `image_url` rules).' },
                  ...options,
                },
              },
            },
            'application/json': {
              schema: {
                type: 'object',
                required: ['image_urls'],
                properties: {
                  image_urls: { type: 'array', minItems: 1, items: { type: 'string', format: 'uri' } },
                  callback_url: { type: 'string', format: 'uri' },
                  ...options,
                },
              },
            },
          },
        },
        responses: {
          '202': {
            description: 'Accepted: the job is queued.',
            headers: { Location: { description: 'The job\'s status URL.', required: true, schema: { type: 'string' } }, ...rateHeaders },
            content: { 'application/json': { schema: ref('JobAccepted') } },
          },
          ...problems(codes.createJob),
        },
      },
    },
    '/v1/jobs/{id}': {
      get: {
        operationId: 'getJob',
        summary: "A job's state, progress and each image's status",
        parameters: [jobId],
        responses: { '200': { description: 'The job.', content: { 'application/json': { schema: ref('Job') } } }, ...problems(codes.getJob) },
      },
      delete: {
        operationId: 'cancelJob',
        summary: 'Cancel the images that have not started (those running finish)',
        parameters: [jobId],
        responses: { '200': { description: 'The job after the cancellation.', content: { 'application/json': { schema: ref('Job') } } }, ...problems(codes.cancelJob) },
      },
    },
    '/v1/jobs/{id}/results': {
      get: {
        operationId: 'getJobResults',
        summary: 'Every result done so far, as one ZIP',
        parameters: [jobId],
        responses: {
          '200': { description: 'A ZIP of the cutouts, named `<n>-<name>-nobg.<ext>`.', content: { 'application/zip': { schema: { type: 'string', contentMediaType: 'application/zip' } } } },
          ...problems(codes.getJobResults),
        },
      },
    },
    '/v1/jobs/{id}/results/{n}': {
      get: {
        operationId: 'getJobResult',
        summary: 'The cutout of image `n` (from 0, in the order sent)',
        parameters: [jobId, { name: 'n', in: 'path', required: true, schema: { type: 'integer', minimum: 0 } }],
        responses: {
          '200': {
            description: 'The cutout.',
            content: Object.fromEntries(Object.values(FORMATS).map((format) => [format.contentType, { schema: { type: 'string', contentMediaType: format.contentType } }])),
          },
          ...problems(codes.getJobResult),
        },
      },
    },
  };
}

export function jobSchemas(): JsonObject {
  const nullableTime = { oneOf: [{ type: 'string', format: 'date-time' }, { type: 'null' }] };
  return {
    JobAccepted: {
      type: 'object',
      required: ['id', 'state', 'statusUrl', 'images'],
      properties: { id: { type: 'string', format: 'uuid' }, state: { type: 'string', enum: ['queued'] }, statusUrl: { type: 'string' }, images: { type: 'integer' } },
    },
    Job: {
      type: 'object',
      required: ['id', 'state', 'createdAt', 'progress', 'images'],
      properties: {
        id: { type: 'string', format: 'uuid' },
        state: { type: 'string', enum: ['queued', 'running', 'succeeded', 'failed', 'canceled'], description: '`succeeded` when at least one image is done, `failed` when none is.' },
        createdAt: { type: 'string', format: 'date-time' },
        startedAt: nullableTime,
        finishedAt: nullableTime,
        expiresAt: { ...nullableTime, description: 'When the results go (the plan\'s retention after the job ended).' },
        progress: {
          type: 'object',
          required: ['total', 'done', 'failed', 'canceled', 'fraction'],
          properties: { total: { type: 'integer' }, done: { type: 'integer' }, failed: { type: 'integer' }, canceled: { type: 'integer' }, fraction: { type: 'number', minimum: 0, maximum: 1 } },
        },
        callback: { oneOf: [{ type: 'object', properties: { url: { type: 'string' } } }, { type: 'null' }] },
        resultsZip: { oneOf: [{ type: 'string' }, { type: 'null' }] },
        images: {
          type: 'array',
          items: {
            type: 'object',
            required: ['n', 'name', 'state'],
            properties: {
              n: { type: 'integer' },
              name: { type: 'string' },
              state: { type: 'string', enum: ['queued', 'running', 'done', 'failed', 'canceled'] },
              result: {
                type: 'object',
                properties: { url: { type: 'string' }, contentType: { type: 'string' }, filename: { type: 'string' }, bytes: { type: 'integer' }, width: { type: 'integer' }, height: { type: 'integer' } },
              },
              error: { type: 'object', required: ['code', 'detail'], properties: { code: { type: 'string', enum: Object.keys(ERROR_CATALOG) }, detail: { type: 'string' } } },
            },
          },
        },
      },
    },
  };
}
