import type { OptionSchema } from '../core/output-options.js';

/** The request's image inputs, as the OpenAPI document describes them. */
export const INPUT_FIELD_DEFINITIONS: Record<string, { description: string; schema: OptionSchema | { type: 'string'; contentMediaType: string } }> = {
  file: {
    description: 'The image (JPEG, PNG, WebP, AVIF, TIFF or GIF; the type is read from the bytes). Not with `image_url`.',
    schema: { type: 'string', contentMediaType: 'application/octet-stream' },
  },
};
