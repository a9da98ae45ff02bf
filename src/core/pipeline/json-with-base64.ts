/**
 * JSON text with bytes in base64 inside one of its strings, made where the bytes are (the render's
 * worker thread: a 24 MP PNG is tens of MB of base64, and encoding, quoting and copying it would
 * block the event loop for tens of milliseconds). `head` is JSON.stringify of the answer with
 * that string left empty (`""`), and `at` the offset just past its opening quote. The result is
 * the same bytes as JSON.stringify with the base64 in place: base64 needs no escaping, so it is
 * written between the quotes as it is.
 */
export function jsonWithBase64(head: string, at: number, bytes: Buffer): Buffer {
  if (head.slice(at - 1, at + 1) !== '""') throw new RangeError('jsonWithBase64: `at` is not inside an empty string');
  const before = head.slice(0, at);
  const after = head.slice(at);
  const data = bytes.toString('base64');
  const out = Buffer.allocUnsafeSlow(Buffer.byteLength(before) + data.length + Buffer.byteLength(after));
  let offset = out.write(before, 0, 'utf8');
  offset += out.write(data, offset, 'latin1');
  out.write(after, offset, 'utf8');
  return out;
}
