import type { Rendered } from '../image/output.js';
import { jsonWithBase64 } from './json-with-base64.js';

/**
 * The `response=json` body: the cutout's facts and the image in base64. Made by the render's
 * worker thread, beside the image (json-with-base64.ts): the same bytes as JSON.stringify of the
 * object.
 */
export function cutoutJson(rendered: Pick<Rendered, 'body' | 'contentType' | 'width' | 'height' | 'foreground'>, filename: string, confidence: number): Buffer {
  const head = JSON.stringify({
    contentType: rendered.contentType,
    filename,
    width: rendered.width,
    height: rendered.height,
    foreground: rendered.foreground,
    // Two decimals: finer would promise more than the figure can tell.
    confidence: Number(confidence.toFixed(2)),
    data: '',
  });
  // `head` ends with `"data":""}`: the data goes between the last two quotes.
  return jsonWithBase64(head, head.length - 2, rendered.body);
}
