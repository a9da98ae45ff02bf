import type busboy from 'busboy';

/**
 * busboy hands a text field over only whole: it joins the part's chunks and decodes them into one
 * string on the event loop as the part ends. For remove.bg's `image_file_b64` (up to about 33 MB
 * of base64) that join took about 100 ms of the host's event loop, and the base64 decode after it
 * several times that. busboy 1.6 has no option to stream a field (its fork @fastify/busboy has
 * `isPartAFile`; moving every form to the fork is a larger change), so this marks that one
 * field's part as a file while its headers are read: its Content-Type becomes
 * application/octet-stream, which busboy streams like any file part, and `onMarked` is called
 * just before busboy emits that part's 'file' event.
 *
 * It hooks busboy's part-header parser: the `_hparser` busboy sets for each part, and that
 * parser's `cb`, both private. Where they are not there (another busboy), nothing is hooked and
 * the field comes whole, as before: readForm works either way, and the tests of the remove.bg
 * route fail on the main thread's decode count. Only a part named `fieldName`, with no filename
 * and no charset of its own, is marked: its text is then UTF-8 (busboy's default charset), as
 * the pool's decode reads it.
 */
export function streamFieldAsFile(parser: busboy.Busboy, fieldName: string, onMarked: () => void): boolean {
  const internals = parser as unknown as Record<string, unknown>;
  if (!Object.hasOwn(internals, '_hparser')) return false;
  let current: unknown = internals._hparser;
  const hooked = new WeakSet<object>();
  const hook = (headerParser: unknown) => {
    if (typeof headerParser !== 'object' || headerParser === null || hooked.has(headerParser)) return;
    const target = headerParser as { cb?: unknown };
    if (typeof target.cb !== 'function') return;
    const cb = target.cb as (header: PartHeader) => void;
    target.cb = (header: PartHeader) => {
      if (isTheField(header, fieldName)) {
        header['content-type'] = ['application/octet-stream'];
        onMarked();
      }
      cb.call(target, header);
    };
    hooked.add(headerParser);
  };
  Object.defineProperty(parser, '_hparser', {
    configurable: true,
    enumerable: true,
    get: () => current,
    set: (value: unknown) => {
      hook(value);
      current = value;
    },
  });
  return true;
}

/** A part's headers as busboy's parser gives them: lower-case names, each with its values. */
type PartHeader = Record<string, string[] | undefined>;

function isTheField(header: PartHeader, fieldName: string): boolean {
  const disposition = header['content-disposition']?.[0];
  if (disposition === undefined || !/^\s*form-data\s*(;|$)/i.test(disposition)) return false;
  const params = disposition.split(';').slice(1).map((param) => param.trim());
  if (params.some((param) => /^filename\*?\s*=/i.test(param))) return false;
  const named = params.some((param) => {
    const match = /^name\s*=\s*(?:"([^"]*)"|([^\s";]*))$/i.exec(param);
    return match !== null && (match[1] ?? match[2]) === fieldName;
  });
  if (!named) return false;
  const types = header['content-type'];
  return types === undefined || (types.length === 1 && !/;\s*charset\s*=/i.test(types[0]!) && !/octet-stream/i.test(types[0]!));
}
