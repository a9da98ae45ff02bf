import type { OptionSchema } from '../core/output-options.js';
import { MAX_REDIRECTS, MAX_URL_LENGTH } from '../core/image-url/options.js';

/** The request's image inputs, as the OpenAPI document describes them. */
export const INPUT_FIELD_DEFINITIONS: Record<string, { description: string; schema: OptionSchema | { type: 'string'; contentMediaType: string } }> = {
  file: {
    description: 'The image (JPEG, PNG, WebP, AVIF, TIFF or GIF; the type is read from the bytes). Not with `image_url`.',
    schema: { type: 'string', contentMediaType: 'application/octet-stream' },
  },
  bg_image: {
    description:
      'Optional second file part: a photo to put behind the cut-out (JPEG, PNG, WebP, AVIF, TIFF or GIF), cover-fitted to the output canvas. Its own limits ' +
      '(bytes: `413 upload_too_large`; pixels: `400 bg_image_too_large`; not an image: `400 bg_image_invalid`). Not with `bg_image_url`, `bg_color`, `channels=alpha` or `format=zip`.',
    schema: { type: 'string', contentMediaType: 'application/octet-stream' },
  },
  image_url: {
    description:
      `Instead of \`file\`: an http(s) URL of the image, fetched by the API (at most ${MAX_REDIRECTS} redirects, the upload size limit, a time limit; ` +
      'private, loopback, link-local and other non-public addresses are refused, each refusal with its own `image_url_*` code).',
    schema: { type: 'string', format: 'uri', maxLength: MAX_URL_LENGTH, examples: ['https://images.example.com/photo.jpg'] },
  },
};
