import type { Rendered } from '../image/output.js';
import { jsonWithBase64 } from '../pipeline/json-with-base64.js';

/** The box remove.bg reports when nothing was found (its answer has numbers there, never null). */
const NO_BOX = { top: 0, left: 0, width: 0, height: 0 };

/**
 * remove.bg's JSON answer (`Accept: application/json`): `{ data: { result_b64, foreground_top,
 * foreground_left, foreground_width, foreground_height } }`. Made by the render's worker thread,
 * beside the image (json-with-base64.ts): the same bytes as JSON.stringify of the object.
 */
export function removeBgResultJson(rendered: Pick<Rendered, 'body' | 'foreground'>): Buffer {
  const box = rendered.foreground ?? NO_BOX;
  const head = JSON.stringify({
    data: {
      result_b64: '',
      foreground_top: box.top,
      foreground_left: box.left,
      foreground_width: box.width,
      foreground_height: box.height,
    },
  });
  // result_b64 is the first key: the data goes just past `{"data":{"result_b64":"`.
  return jsonWithBase64(head, RESULT_AT, rendered.body);
}

const RESULT_AT = '{"data":{"result_b64":"'.length;
