import type { Rendered } from '../image/output.js';

/**
 * The `response=json` body: the cutout's facts and the image in base64. Made by the render's
 * worker thread, beside the image (a 24 MP PNG is tens of MB of base64, and encoding, quoting
 * and copying it would block the event loop for tens of milliseconds). The same bytes as
 * JSON.stringify of the object: base64 needs no escaping, so it is written between the quotes.
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
  const prefix = head.slice(0, -2);
  const data = rendered.body.toString('base64');
  const out = Buffer.allocUnsafeSlow(prefix.length + data.length + 2);
  let at = out.write(prefix, 0, 'utf8');
  at += out.write(data, at, 'latin1');
  at += out.write('"}', at, 'latin1');
  return at === out.length ? out : out.subarray(0, at);
}
