import type { OptionSchema } from '../core/output-options.js';
import { MAX_REDIRECTS, MAX_URL_LENGTH } from '../core/image-url/options.js';

/** The request's image inputs, as the OpenAPI document describes them. */
export const INPUT_FIELD_DEFINITIONS: Record<string, { description: string; schema: OptionSchema | { type: 'string'; contentMediaType: string } }> = {
  file: {
    description: 'The image (JPEG, PNG, WebP, AVIF, TIFF or GIF; the type is read from the bytes). Not with `image_url`.',
    schema: { type: 'string', contentMediaType: 'application/octet-stream' },
  },
  image_url: {
    description:
      `Instead of \`file\`: an http(s) URL of the image, fetched by the API (at most ${MAX_REDIRECTS} redirects, the upload size limit, a time limit; ` +
      'private, loopback, link-local and other non-public addresses are refused, each refusal with its own `image_url_*` code).',
    schema: { type: 'string', format: 'uri', maxLength: MAX_URL_LENGTH, examples: ['https://images.example.com/photo.jpg'] },
  },
};
