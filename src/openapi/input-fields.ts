import type { OptionSchema } from '../core/output-options.js';
import { MAX_HINTS_BYTES } from '../core/image/hints.js';
import { MAX_REDIRECTS, MAX_URL_LENGTH } from '../core/image-url/options.js';

/** The request's image inputs, as the OpenAPI document describes them. */
export const INPUT_FIELD_DEFINITIONS: Record<string, { description: string; schema: OptionSchema | { type: 'string'; contentMediaType: string } }> = {
  file: {
    description: 'The image (JPEG, PNG, WebP, AVIF, TIFF or GIF; the type is read from the bytes). Not with `image_url`.',
    schema: { type: 'string', contentMediaType: 'application/octet-stream' },
  },
  hints: {
    description:
      `Optional: an image marking pixels to keep or remove (scribbles), at most ${MAX_HINTS_BYTES / 1024 / 1024} MiB, over the image as displayed (EXIF orientation applied), ` +
      'at its size or scaled (the same aspect ratio, within 1 % or a pixel). Per pixel: white (luma >= 192) keep, alpha exactly 255; black (luma <= 63) remove, alpha 0; ' +
      'transparent (alpha < 128) or grey: no hint. Around the strokes the mask blends linearly into the model\'s over the long side / 128 px (2-48). ' +
      'Refusals: `hints_size_mismatch`, `invalid_hints` (400); over the size `upload_too_large` (413). Multipart only.',
    schema: { type: 'string', contentMediaType: 'image/png' },
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
