import { FORMATS } from '../core/image/output.js';
import { PARAMETERS } from '../core/removebg/parameters.js';
import type { JsonObject } from './document.js';

/**
 * The OpenAPI paths of remove.bg's wire format (`POST /v1.0/removebg`, `GET /v1.0/account`), from
 * the parameter table the mapping layer runs on (src/core/removebg/parameters.ts).
 */
export function removeBgPaths(rateLimitHeaders: JsonObject, optionalRateLimitHeaders: JsonObject): JsonObject {
  const parameters: JsonObject = Object.fromEntries(Object.entries(PARAMETERS).map(([name, definition]) => [name, { type: 'string', description: definition.note }]));
  const sources = {
    image_file_b64: { type: 'string', contentEncoding: 'base64', description: 'The image, base64 (a `data:` URL prefix is allowed).' },
    image_url: { type: 'string', format: 'uri', description: 'The image by URL, fetched under the same address policy as bgcut\'s `image_url`.' },
  };
  // bg_image_file is a file part: only in a multipart form.
  const { bg_image_file: backgroundFile, ...textParameters } = parameters;
  const textBody = { type: 'object', description: 'Exactly one of `image_file_b64` and `image_url`.', properties: { ...sources, ...textParameters }, additionalProperties: false };
  const errors = (statuses: number[]) =>
    Object.fromEntries(
      statuses.map((status) => [
        String(status),
        {
          description: REMOVE_BG_STATUS[status] ?? 'See `errors[0].code`.',
          headers: { ...optionalRateLimitHeaders, ...(status === 429 || status === 503 ? { 'Retry-After': { $ref: '#/components/headers/Retry-After' } } : {}) },
          content: { 'application/json': { schema: { $ref: '#/components/schemas/RemoveBgErrors' } } },
        },
      ]),
    );
  const resultHeaders = {
    ...rateLimitHeaders,
    'X-Width': { $ref: '#/components/headers/X-Width' },
    'X-Height': { $ref: '#/components/headers/X-Height' },
    'X-Type': { description: 'The foreground type: the `type` given, or `other` (bgcut does not classify). Absent with `type_level=none`.', schema: { type: 'string' } },
    'X-Credits-Charged': { description: 'What the account\'s monthly quota was charged, in its unit.', required: true, schema: { type: 'string', pattern: '^\\d+$' } },
    'X-Foreground-Top': { $ref: '#/components/headers/X-Foreground-Top' },
    'X-Foreground-Left': { $ref: '#/components/headers/X-Foreground-Left' },
    'X-Foreground-Width': { $ref: '#/components/headers/X-Foreground-Width' },
    'X-Foreground-Height': { $ref: '#/components/headers/X-Foreground-Height' },
  };
  return {
    '/v1.0/removebg': {
      post: {
        operationId: 'removeBgCompatible',
        tags: ['remove.bg compatible'],
        summary: 'remove.bg\'s `POST /v1.0/removebg`, over the same pipeline',
        description: 'remove.bg\'s request and answers (docs/remove-bg.md): its clients work with only their endpoint changed. Same key (`X-Api-Key`), limits, metering and `Idempotency-Key`.',
        parameters: [{ name: 'Accept', in: 'header', required: false, description: '`application/json` for `{ data: { result_b64, foreground_* } }`.', schema: { type: 'string' } }],
        requestBody: {
          required: true,
          content: {
            'multipart/form-data': {
              schema: {
                type: 'object',
                description: 'Exactly one of `image_file`, `image_file_b64` and `image_url`.',
                properties: {
                  image_file: { type: 'string', contentMediaType: 'application/octet-stream' },
                  hints: { type: 'string', contentMediaType: 'image/png', description: 'bgcut\'s extension: keep/remove strokes, as `hints` of `/v1/remove-bg` (white keep, black remove, transparent no hint).' },
                  ...sources,
                  ...parameters,
                  bg_image_file: { ...(backgroundFile as JsonObject), contentMediaType: 'application/octet-stream' },
                },
                additionalProperties: false,
              },
            },
            'application/json': { schema: textBody },
            'application/x-www-form-urlencoded': { schema: textBody },
          },
        },
        responses: {
          '200': {
            description: 'The result image, or with `Accept: application/json` its base64 and foreground box.',
            headers: resultHeaders,
            content: {
              ...Object.fromEntries(Object.values(FORMATS).map((format) => [format.contentType, { schema: { type: 'string', contentMediaType: format.contentType } }])),
              'application/json': { schema: { $ref: '#/components/schemas/RemoveBgResult' } },
            },
          },
          ...errors([400, 402, 403, 405, 409, 422, 429, 500, 503, 504]),
        },
      },
    },
    '/v1.0/account': {
      get: {
        operationId: 'removeBgAccount',
        tags: ['remove.bg compatible'],
        summary: 'remove.bg\'s `GET /v1.0/account`, from the account\'s plan and usage',
        responses: {
          '200': { description: 'Credits left this month and the sizes the plan allows.', headers: rateLimitHeaders, content: { 'application/json': { schema: { $ref: '#/components/schemas/RemoveBgAccount' } } } },
          ...errors([403, 405, 500, 503]),
        },
      },
    },
  };
}

const REMOVE_BG_STATUS: Record<number, string> = {
  400: 'Invalid parameters or input file unprocessable (not charged).',
  402: 'Insufficient credits: the monthly quota is used up (not charged).',
  403: 'Authentication failed (`auth_failed`), or the key may not be used from here (not charged).',
  429: 'Rate limit exceeded (not charged).',
};

export const REMOVE_BG_SCHEMAS: JsonObject = {
  RemoveBgErrors: {
    type: 'object',
    required: ['errors'],
    properties: {
      errors: {
        type: 'array',
        minItems: 1,
        items: { type: 'object', required: ['title', 'code'], properties: { title: { type: 'string' }, code: { type: 'string' }, detail: { type: 'string' } } },
      },
    },
  },
  RemoveBgResult: {
    type: 'object',
    required: ['data'],
    properties: {
      data: {
        type: 'object',
        required: ['result_b64', 'foreground_top', 'foreground_left', 'foreground_width', 'foreground_height'],
        properties: {
          result_b64: { type: 'string', contentEncoding: 'base64' },
          foreground_top: { type: 'integer' },
          foreground_left: { type: 'integer' },
          foreground_width: { type: 'integer' },
          foreground_height: { type: 'integer' },
        },
      },
    },
  },
  RemoveBgAccount: {
    type: 'object',
    required: ['data'],
    properties: {
      data: {
        type: 'object',
        properties: {
          attributes: {
            type: 'object',
            properties: {
              credits: {
                type: 'object',
                properties: {
                  total: { type: ['number', 'null'], description: 'What is left of the monthly quota, in its unit; null for a plan without a quota.' },
                  subscription: { type: ['number', 'null'] },
                  payg: { type: 'number' },
                  enterprise: { type: 'number' },
                },
              },
              api: { type: 'object', properties: { free_calls: { type: 'integer' }, sizes: { type: 'string', enum: ['all', 'preview'] } } },
            },
          },
        },
      },
    },
  },
};
