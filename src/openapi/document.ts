import { ERROR_CATALOG, type ErrorCode } from '../core/errors.js';
import { FORMATS } from '../core/image/output.js';
import { OUTPUT_OPTION_DEFINITIONS, OUTPUT_OPTION_NAMES } from '../core/output-options.js';
import { INPUT_FIELD_DEFINITIONS } from './input-fields.js';
import { REMOVE_BG_SCHEMAS, removeBgPaths } from './remove-bg.js';
import { JOB_ONLY_CODES, jobOperationCodes, jobPaths, jobSchemas } from './jobs.js';

/** What the document says that depends on the handler's configuration. */
export interface OpenApiContext {
  /** Base URL the paths hang off, e.g. `/api` when mounted there, or `https://api.example.com`. */
  serverUrl: string;
  maxUploadBytes: number;
  models: string[];
  defaultModel: string;
  problemTypeBase: string;
  version?: string;
  /** Whether remove.bg's wire format is served (`removeBgApi`). Default true. */
  removeBgApi?: boolean;
}

export type JsonObject = { [key: string]: unknown };

/** Codes only the host app's own parts (bad_request) or remove.bg's route (src/core/removebg) answer with. */
const REMOVE_BG_ONLY: ReadonlySet<ErrorCode> = new Set(['bad_request', 'unknown_foreground', 'malformed_base64']);

/** Codes each operation can answer with; everything else about them comes from ERROR_CATALOG. */
const UNIDENTIFIED: ErrorCode[] = (Object.keys(ERROR_CATALOG) as ErrorCode[]).filter((code) => ERROR_CATALOG[code].status === 401);
// not_found is for paths outside the API; client_closed is only logged, nobody is left to receive it.
// bad_request comes from a host app's own parts (the examples' error handlers), never from bgcut's routes.
const REMOVE_BACKGROUND_CODES = (Object.keys(ERROR_CATALOG) as ErrorCode[]).filter((code) => code !== 'not_found' && code !== 'client_closed' && !JOB_ONLY_CODES.includes(code) && !REMOVE_BG_ONLY.has(code));
export const OPERATION_CODES = {
  removeBackground: REMOVE_BACKGROUND_CODES,
  ...jobOperationCodes(REMOVE_BACKGROUND_CODES),
  getAccount: [...UNIDENTIFIED, 'account_suspended', 'ip_not_allowed', 'origin_not_allowed', 'method_not_allowed', 'service_unavailable', 'internal_error'] as ErrorCode[],
  listModels: ['method_not_allowed', 'service_unavailable', 'internal_error'] as ErrorCode[],
} satisfies Record<string, ErrorCode[]>;

const RATE_LIMIT_HEADERS = {
  'RateLimit-Policy': { description: 'The plan\'s per-minute policy (IETF draft), e.g. `"minute";q=100;w=60`.', schema: { type: 'string' } },
  RateLimit: { description: 'What remains of it and when it resets (IETF draft), e.g. `"minute";r=99;t=42`.', schema: { type: 'string' } },
  'X-RateLimit-Limit': { description: 'Requests per minute of the plan.', schema: { type: 'string', pattern: '^\\d+$' } },
  'X-RateLimit-Remaining': { description: 'Requests left in this minute.', schema: { type: 'string', pattern: '^\\d+$' } },
  'X-RateLimit-Reset': { description: 'Seconds until the minute\'s limit resets.', schema: { type: 'string', pattern: '^\\d+$' } },
} as const;

const IMAGE_HEADERS = {
  'X-Width': { description: 'Width of the returned image, px.', required: true, schema: { type: 'string', pattern: '^\\d+$' } },
  'X-Height': { description: 'Height of the returned image, px.', required: true, schema: { type: 'string', pattern: '^\\d+$' } },
  'X-Foreground-Top': { description: 'Foreground box in the returned image (all 0 when there is no foreground).', required: true, schema: { type: 'string', pattern: '^\\d+$' } },
  'X-Foreground-Left': { description: 'See X-Foreground-Top.', required: true, schema: { type: 'string', pattern: '^\\d+$' } },
  'X-Foreground-Width': { description: 'See X-Foreground-Top.', required: true, schema: { type: 'string', pattern: '^\\d+$' } },
  'X-Foreground-Height': { description: 'See X-Foreground-Top.', required: true, schema: { type: 'string', pattern: '^\\d+$' } },
  'X-Confidence': {
    description:
      'How sure the model was of this cutout, 0.00 to 1.00: the share of the object\'s mask that is decided (probability outside 0.1..0.9) ' +
      'and on which the passes of `best` agree; 0 when nothing was found. A ranking, not a probability: send the lowest-scoring cutouts to a person.',
    required: true,
    schema: { type: 'string', pattern: '^(0\\.\\d\\d|1\\.00)$' },
  },
  'Server-Timing': { description: 'Milliseconds per stage (decode, preprocess, inference, postprocess, encode).', schema: { type: 'string' } },
} as const;

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const headerRef = (name: string) => ({ $ref: `#/components/headers/${name}` });

/** The OpenAPI 3.1 document of the public API, built from the definitions the handler runs on. */
export function buildOpenApiDocument(context: OpenApiContext): JsonObject {
  const optionProperties: JsonObject = {};
  for (const name of OUTPUT_OPTION_NAMES) {
    const definition = OUTPUT_OPTION_DEFINITIONS[name];
    optionProperties[name] = { ...definition.schema, description: definition.description, ...(name === 'model' ? { examples: context.models } : {}) };
  }
  const inputProperties: JsonObject = {};
  for (const [name, definition] of Object.entries(INPUT_FIELD_DEFINITIONS)) {
    inputProperties[name] = { ...definition.schema, description: definition.description };
  }

  return {
    openapi: '3.1.0',
    info: {
      title: 'bgcut background removal API',
      version: context.version ?? '1',
      description:
        'Removes the background of an image. Authenticate with the `X-API-KEY` header; keep keys on your servers, never in frontend code. ' +
        'Errors are `application/problem+json` (RFC 9457) with a stable `code`. Every answer to an identified account carries its rate-limit headers.',
    },
    servers: [{ url: context.serverUrl || '/' }],
    security: [{ ApiKey: [] }],
    paths: {
      '/v1/remove-bg': {
        post: {
          operationId: 'removeBackground',
          summary: 'Remove the background of an image',
          description:
            'Send the image as the part `file` of a multipart form, or by URL (`image_url`). Options go in form fields or the query string ' +
            '(the same option in both must agree). `Accept: application/json` returns the image base64 in JSON with its metadata.',
          parameters: [
            ...OUTPUT_OPTION_NAMES.map((name) => ({ name, in: 'query', required: false, schema: optionProperties[name] })),
            { name: 'Accept', in: 'header', required: false, description: '`application/json` for the JSON answer.', schema: { type: 'string' } },
            {
              name: 'Idempotency-Key',
              in: 'header',
              required: false,
              description:
                'Makes retries safe: the first request with a key is run and charged; a retry with the same key within 24 hours is not charged again and ' +
                'gets the first answer (with `Idempotent-Replayed: true`) while it is kept (10 minutes by default), `409 idempotency_key_in_use` while the first is still running, ' +
                'and `422 idempotency_key_reused` if the request differs (another image, options or path). Keys are per account; a request that fails is not charged and frees its key. ' +
                'Use a new random UUID per request and keep it across that request\'s retries.',
              schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7E]+$' },
            },
          ],
          requestBody: {
            required: true,
            content: {
              'multipart/form-data': {
                schema: {
                  type: 'object',
                  description: 'Exactly one of `file` and `image_url`.',
                  properties: { ...inputProperties, ...optionProperties },
                  additionalProperties: false,
                },
                encoding: {
                  file: { contentType: 'image/jpeg, image/png, image/webp, image/avif, image/tiff, image/gif' },
                  hints: { contentType: 'image/png, image/jpeg, image/webp, image/tiff, image/gif' },
                },
              },
              ...(inputProperties.image_url
                ? {
                    'application/json': {
                      schema: {
                        type: 'object',
                        required: ['image_url'],
                        properties: { image_url: inputProperties.image_url, ...optionProperties },
                        additionalProperties: false,
                      },
                    },
                  }
                : {}),
            },
          },
          responses: {
            '200': {
              description: 'The image with its background removed (or the JSON answer).',
              headers: {
                ...Object.fromEntries(Object.keys(IMAGE_HEADERS).map((name) => [name, headerRef(name)])),
                ...rateLimitHeaderRefs(true),
                'Content-Disposition': { description: 'inline, with a file name derived from the upload\'s.', schema: { type: 'string' } },
                'Idempotent-Replayed': { description: '`true` when this is the stored answer to an earlier request with the same Idempotency-Key (not charged again).', schema: { type: 'string', enum: ['true'] } },
              },
              content: {
                ...Object.fromEntries(Object.values(FORMATS).map((format) => [format.contentType, { schema: { type: 'string', contentMediaType: format.contentType } }])),
                'application/json': { schema: ref('Cutout') },
              },
            },
            ...problemResponses(OPERATION_CODES.removeBackground),
          },
        },
      },
      '/v1/account': {
        get: {
          operationId: 'getAccount',
          summary: 'The caller\'s plan, limits, usage this month and what remains',
          responses: {
            '200': {
              description: 'The account\'s standing.',
              headers: rateLimitHeaderRefs(true),
              content: { 'application/json': { schema: ref('Account') } },
            },
            ...problemResponses(OPERATION_CODES.getAccount),
          },
        },
      },
      '/v1/models': {
        get: {
          operationId: 'listModels',
          summary: 'The models this API serves: family, input size, licence and what each quality mode costs',
          description: 'Public, like this document. Which models an account\'s plan allows is in `GET /v1/account`.',
          security: [],
          responses: {
            '200': { description: 'Every model a request may name with `model`, the default first.', content: { 'application/json': { schema: ref('ModelList') } } },
            ...problemResponses(OPERATION_CODES.listModels),
          },
        },
      },
      ...(context.removeBgApi === false ? {} : removeBgPaths(rateLimitHeaderRefs(true), rateLimitHeaderRefs(false))),
      ...jobPaths(optionProperties, problemResponses, OPERATION_CODES, rateLimitHeaderRefs(false)),
    },
    components: {
      securitySchemes: {
        ApiKey: { type: 'apiKey', in: 'header', name: 'X-API-KEY', description: 'One key per request, in this header only (not Authorization, not the query string).' },
      },
      headers: {
        ...Object.fromEntries(Object.entries({ ...RATE_LIMIT_HEADERS, ...IMAGE_HEADERS }).map(([name, { description, schema }]) => [name, { description, schema }])),
        'Retry-After': { description: 'Seconds to wait before retrying.', required: true, schema: { type: 'string', pattern: '^\\d+$' } },
        'WWW-Authenticate': { description: 'How to authenticate: `ApiKey realm="bgcut", header="X-API-KEY"`.', required: true, schema: { type: 'string' } },
      },
      schemas: {
        Problem: {
          type: 'object',
          description: 'RFC 9457 problem details.',
          required: ['type', 'title', 'status', 'detail', 'code'],
          properties: {
            type: { type: 'string', description: `\`${context.problemTypeBase}\` followed by the code.` },
            title: { type: 'string' },
            status: { type: 'integer' },
            detail: { type: 'string' },
            code: { type: 'string', enum: Object.keys(ERROR_CATALOG), description: 'Stable: branch on this.' },
            instance: { type: 'string' },
          },
        },
        Box: {
          type: 'object',
          required: ['top', 'left', 'width', 'height'],
          properties: { top: { type: 'integer' }, left: { type: 'integer' }, width: { type: 'integer' }, height: { type: 'integer' } },
        },
        Cutout: {
          type: 'object',
          required: ['contentType', 'filename', 'width', 'height', 'foreground', 'confidence', 'data'],
          properties: {
            contentType: { type: 'string', enum: Object.values(FORMATS).map((f) => f.contentType) },
            filename: { type: 'string' },
            width: { type: 'integer' },
            height: { type: 'integer' },
            foreground: { oneOf: [ref('Box'), { type: 'null' }] },
            confidence: { type: 'number', minimum: 0, maximum: 1, description: 'As the X-Confidence header.' },
            data: { type: 'string', contentEncoding: 'base64' },
          },
        },
        Account: accountSchema(context),
        ...(context.removeBgApi === false ? {} : REMOVE_BG_SCHEMAS),
        ModelList: modelListSchema(context),
        ...jobSchemas(),
      },
    },
  };
}

function rateLimitHeaderRefs(required: boolean): JsonObject {
  return Object.fromEntries(
    Object.keys(RATE_LIMIT_HEADERS).map((name) => [name, required ? { ...RATE_LIMIT_HEADERS[name as keyof typeof RATE_LIMIT_HEADERS], required: true } : headerRef(name)]),
  );
}

/** One response per status, its `code` limited to the codes that status has in the catalogue. */
function problemResponses(codes: ErrorCode[]): JsonObject {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of codes) byStatus.set(ERROR_CATALOG[code].status, [...(byStatus.get(ERROR_CATALOG[code].status) ?? []), code]);
  const responses: JsonObject = {};
  for (const [status, statusCodes] of [...byStatus].sort(([a], [b]) => a - b)) {
    const headers: JsonObject = Object.fromEntries(Object.keys(RATE_LIMIT_HEADERS).map((name) => [name, headerRef(name)]));
    if (status === 429 || status === 503) headers['Retry-After'] = headerRef('Retry-After');
    if (status === 401) headers['WWW-Authenticate'] = headerRef('WWW-Authenticate');
    if (status === 405) headers.Allow = { description: 'The method to use.', required: true, schema: { type: 'string' } };
    responses[String(status)] = {
      description: statusCodes.map((code) => `\`${code}\`: ${ERROR_CATALOG[code].title}.`).join(' '),
      headers,
      content: {
        'application/problem+json': {
          schema: { allOf: [ref('Problem'), { properties: { status: { const: status }, code: { enum: statusCodes } } }] },
        },
      },
    };
  }
  return responses;
}

function accountSchema(context: OpenApiContext): JsonObject {
  const int = { type: 'integer' };
  const nullable = (schema: JsonObject) => ({ oneOf: [schema, { type: 'null' }] });
  return {
    type: 'object',
    required: ['account', 'keyId', 'plan', 'usage', 'quota', 'rate', 'inProgress'],
    properties: {
      account: { type: 'object', required: ['id', 'status'], properties: { id: { type: 'string' }, status: { type: 'string', enum: ['active', 'suspended'] } } },
      keyId: { type: 'string', description: 'Short id of the key used (never the key).' },
      plan: {
        type: 'object',
        required: ['name', 'requestsPerMinute', 'maxUploadBytes', 'maxInputMegapixels'],
        properties: {
          name: { type: 'string' },
          requestsPerMinute: int,
          burst: int,
          maxConcurrent: nullable(int),
          maxUploadBytes: { type: 'integer', maximum: context.maxUploadBytes },
          maxInputMegapixels: { type: 'number' },
          monthlyQuota: nullable({ type: 'object', properties: { unit: { type: 'string', enum: ['images', 'megapixels'] }, amount: int } }),
          outputOptions: nullable({ type: 'array', items: { type: 'string', enum: OUTPUT_OPTION_NAMES } }),
        },
      },
      usage: { type: 'object', required: ['month', 'images', 'megapixels'], properties: { month: { type: 'string' }, images: int, megapixels: { type: 'number' } } },
      quota: nullable({
        type: 'object',
        required: ['unit', 'amount', 'used', 'remaining', 'resetsAt'],
        properties: { unit: { type: 'string' }, amount: int, used: { type: 'number' }, remaining: { type: 'number' }, resetsAt: { type: 'string', format: 'date-time' } },
      }),
      rate: { type: 'object', required: ['limit', 'remaining', 'resetSeconds'], properties: { limit: int, remaining: int, resetSeconds: int } },
      inProgress: int,
    },
  };
}

function modelListSchema(context: OpenApiContext): JsonObject {
  const mode = { type: 'object', required: ['size', 'passes'], properties: { size: { type: 'integer', description: 'Model input size, px.' }, passes: { type: 'integer', description: 'Most model passes per cutout.' } } };
  return {
    type: 'object',
    required: ['models'],
    properties: {
      models: {
        type: 'array',
        items: {
          type: 'object',
          required: ['name', 'default', 'family', 'input', 'licence', 'commercialUse', 'modes'],
          properties: {
            name: { type: 'string', description: 'What `model` names.', examples: context.models },
            default: { type: 'boolean', description: 'Used when a request names no model.' },
            family: { type: 'string', description: '`u2net`, `isnet`, `birefnet`, `bria-rmbg`, `ben2`, or `custom`.' },
            input: { type: 'object', required: ['width', 'height'], properties: { width: { type: 'integer' }, height: { type: 'integer' } } },
            licence: { type: 'string', description: 'The weights\' licence (SPDX where there is one).' },
            commercialUse: { oneOf: [{ type: 'boolean' }, { type: 'null' }], description: 'False when the licence forbids commercial use; null when unknown.' },
            notice: { type: 'string', description: 'Present when the licence restricts use.' },
            modes: { type: 'object', required: ['fast', 'balanced', 'best'], properties: { fast: mode, balanced: mode, best: mode } },
          },
        },
      },
    },
  };
}
