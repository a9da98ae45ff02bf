import busboy from 'busboy';
import type { Readable } from 'node:stream';
import { bodyAlreadyRead, BODY_ALREADY_READ_HELP } from '../util/read-body.js';
import { ApiError } from './errors.js';
import { feedInSlices, type SlicedFeed } from './feed-in-slices.js';
import type { IncomingHeaders } from './http-types.js';
import { streamFieldAsFile } from './multipart-streamed-field.js';
import { UploadBytes } from './upload-bytes.js';

export interface UploadLimits {
  /** Largest file, in bytes. */
  maxFileBytes: number;
  /** Form fields other than the file. */
  maxFields: number;
  /** Largest form field value, in bytes. */
  maxFieldBytes: number;
}

export interface Upload {
  file: Buffer;
  filename: string;
  /** The part's declared type: informative only, the image type is sniffed from the bytes. */
  declaredType: string;
  fields: Record<string, string>;
  /** Optional file parts beside the image (FormShape.extraFiles), by part name: e.g. `hints`. */
  parts?: Record<string, UploadedFile>;
  /** The large field's bytes when they were streamed (see BatchUpload.largeFieldBytes). */
  largeFieldBytes?: Buffer;
}

/**
 * What `fields` holds for a large field whose bytes were streamed (Upload.largeFieldBytes): the
 * same emptiness as the text, so which source was given is decided as before.
 */
export const STREAMED_FIELD = 'streamed';

/** Room for the multipart framing and fields around the file, in bytes. */
const ENVELOPE_BYTES = 64 * 1024;

/** Largest body accepted for these limits; a declared Content-Length above it is refused unread. */
export function maxBodyBytes(limits: UploadLimits): number {
  return limits.maxFileBytes + limits.maxFields * limits.maxFieldBytes + ENVELOPE_BYTES;
}

/** One text field allowed to be longer than `maxFieldBytes` (remove.bg's `image_file_b64`). */
export interface LargeField {
  name: string;
  maxBytes: number;
}

/** Which parts make up the form: bgcut's own (`file`), or another dialect's (remove.bg's `image_file`). */
export interface FormShape {
  /** Name of the file part. Default `file`. */
  fileField?: string;
  /** Text fields that may stand in for the file (`image_url`): then the Upload's file is empty. */
  fileAlternatives?: string[];
  largeField?: LargeField;
  /** Optional file parts beside the image, each at most once: part name → its largest size in bytes. */
  extraFiles?: Record<string, number>;
}

/** One file part of a form. */
export interface UploadedFile {
  file: Buffer;
  filename: string;
  /** The part's declared type: informative only, the image type is sniffed from the bytes. */
  declaredType: string;
}

/** A form of several `file` parts (a job's batch). */
export interface BatchUpload {
  files: UploadedFile[];
  fields: Record<string, string>;
  /** The optional parts (FormShape.extraFiles) that came. */
  parts?: Record<string, UploadedFile>;
  /**
   * The large field's (FormShape.largeField) text as its UTF-8 bytes, streamed into one buffer
   * (shared memory when the body declared its length) instead of built into a string on the
   * event loop (multipart-streamed-field.ts); `fields` then holds STREAMED_FIELD (or '' when it
   * was empty) in its place.
   */
  largeFieldBytes?: Buffer;
}

export interface BatchLimits extends UploadLimits {
  /** Most `file` parts; one more is 400 `too_many_files`. */
  maxFiles: number;
  /** Most bytes of all files together; more is 413 `upload_too_large`. */
  maxTotalBytes: number;
}

/** Largest body accepted for a batch of these limits. */
export function maxBatchBodyBytes(limits: BatchLimits): number {
  return limits.maxTotalBytes + limits.maxFields * limits.maxFieldBytes + (limits.maxFiles + 1) * ENVELOPE_BYTES;
}

/**
 * Reads a multipart/form-data body that must hold exactly one file part named `file`, with
 * every busboy limit set (its defaults are Infinity). Rejects with an ApiError naming the limit
 * that was hit, or with the signal's reason when it aborts (the client left, or its time ran
 * out). On rejection the body may be partly unread: the caller decides what to do with the rest.
 */
export async function readUpload(
  body: Readable,
  headers: IncomingHeaders,
  limits: UploadLimits,
  signal: AbortSignal,
  /** A form field that may stand in for the file (`image_url`), or the form's whole shape. */
  shape?: string | FormShape,
): Promise<Upload> {
  const formShape: FormShape = typeof shape === 'string' ? { fileAlternatives: [shape] } : (shape ?? {});
  const extraBytes = Object.values(formShape.extraFiles ?? {}).reduce((sum, bytes) => sum + bytes + ENVELOPE_BYTES, 0);
  const maxBytes = maxBodyBytes(limits) + (formShape.largeField?.maxBytes ?? 0) + extraBytes;
  const form = await readForm(body, headers, { ...limits, maxFiles: 1, maxTotalBytes: limits.maxFileBytes }, signal, formShape, maxBytes);
  const first = form.files[0];
  const parts = form.parts ? { parts: form.parts } : {};
  const large = form.largeFieldBytes ? { largeFieldBytes: form.largeFieldBytes } : {};
  if (!first) return { file: Buffer.alloc(0), filename: '', declaredType: '', fields: form.fields, ...parts, ...large };
  return { ...first, fields: form.fields, ...parts, ...large };
}

/**
 * Reads a multipart/form-data body of up to `maxFiles` parts named `file` (at least one), with
 * the same limits per file as `readUpload` and a cap on all of them together.
 */
export function readBatchUpload(body: Readable, headers: IncomingHeaders, limits: BatchLimits, signal: AbortSignal): Promise<BatchUpload> {
  return readForm(body, headers, limits, signal, {}, maxBatchBodyBytes(limits));
}

function readForm(
  body: Readable,
  headers: IncomingHeaders,
  limits: BatchLimits,
  signal: AbortSignal,
  shape: FormShape,
  maxBytes: number,
): Promise<BatchUpload> {
  const fileField = shape.fileField ?? 'file';
  const largeField = shape.largeField;
  const extraFiles = shape.extraFiles ?? {};
  const extraCount = Object.keys(extraFiles).length;
  const contentType = headers['content-type'];
  if (typeof contentType !== 'string' || !/^multipart\/form-data\s*;/i.test(contentType)) {
    return Promise.reject(new ApiError('not_multipart'));
  }
  const declaredLength = Number(headers['content-length']);
  if (Number.isFinite(declaredLength) && declaredLength > maxBytes) {
    return Promise.reject(new ApiError('upload_too_large', { detail: `The upload is larger than ${limits.maxTotalBytes} bytes.` }));
  }

  // Never pipe a stream someone else has read into the parser: it would wait for an end that
  // already came, until the upload timer answered 408 for what is a setup mistake.
  if (bodyAlreadyRead(body)) return Promise.reject(new ApiError('body_already_read', { detail: BODY_ALREADY_READ_HELP }));

  let parser: busboy.Busboy;
  try {
    parser = busboy({
      headers: headers as Record<string, string>,
      // File names in UTF-8, as browsers send them (busboy's default reads them as latin1).
      defParamCharset: 'utf8',
      // busboy signals a size or parts limit when the count *reaches* it (a file of exactly
      // fileSize bytes is flagged; the part that makes `parts` is flagged), so each is set one
      // above what is allowed: a file of maxFileBytes, a field of maxFieldBytes, and maxFields
      // fields beside the file all pass. `fields` and `files` are exact (checked as a part starts).
      // The large field, streamed as a file part (multipart-streamed-field.ts), is one more file
      // for busboy: its own limits are checked here, as the field's were.
      limits: {
        fileSize: Math.max(limits.maxFileBytes, ...Object.values(extraFiles), largeField ? largeField.maxBytes : 0) + 1,
        files: limits.maxFiles + extraCount + (largeField ? 1 : 0),
        fields: limits.maxFields,
        fieldSize: Math.max(limits.maxFieldBytes, largeField?.maxBytes ?? 0) + 1,
        fieldNameSize: 100,
        parts: limits.maxFields + limits.maxFiles + extraCount + 1,
        headerPairs: 20,
      },
    });
  } catch (error) {
    return Promise.reject(new ApiError('malformed_multipart', { detail: (error as Error).message, cause: error }));
  }

  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<BatchUpload>((resolve, reject) => {
    // No prototype: a field named `__proto__` is kept (and refused as an unknown option), not swallowed by the setter.
    const fields: Record<string, string> = Object.create(null) as Record<string, string>;
    const files: { info: Omit<UploadedFile, 'file'>; bytes: UploadBytes; done: boolean }[] = [];
    // A form of one file: that file is at most the declared body, so its bytes are copied into
    // one buffer as they arrive (upload-bytes.ts); a batch's files are joined from chunks.
    const capacity = limits.maxFiles === 1 && Number.isSafeInteger(declaredLength) && declaredLength > 0 ? Math.min(declaredLength, limits.maxFileBytes + 1) : 0;
    const extras = new Map<string, { info: Omit<UploadedFile, 'file'>; chunks: Buffer[]; done: boolean }>();
    let received = 0;
    let fileBytes = 0;
    let settled = false;
    let feed: SlicedFeed | undefined;
    // The large field streamed (the last one sent, as a field's last value is kept), and whether
    // the part busboy is about to emit as a file is that field.
    let large: { bytes: UploadBytes; done: boolean } | undefined;
    let largeNext = false;
    // Counted here when the large field is streamed, so busboy's own counts (which see it as a
    // file) refuse the same forms as before: fields with it, file parts without it.
    let fieldCount = 0;
    let fileParts = 0;
    const streaming = largeField !== undefined && streamFieldAsFile(parser, largeField.name, () => (largeNext = true));
    const tooManyFiles = () => new ApiError('too_many_files', limits.maxFiles > 1 ? { detail: `Send at most ${limits.maxFiles} files, each in a part named "file".` } : {});
    const fieldTooLarge = (name: string) => new ApiError('field_too_large', { detail: `The field "${name.slice(0, 100)}" is longer than ${limits.maxFieldBytes} bytes.` });

    const onAbort = () => fail(signal.reason instanceof ApiError ? signal.reason : new ApiError('client_closed'));
    signal.addEventListener('abort', onAbort, { once: true });

    function cleanup(): void {
      signal.removeEventListener('abort', onAbort);
      feed?.stop();
    }

    function fail(error: ApiError): void {
      if (settled) return;
      settled = true;
      cleanup();
      // Stop parsing; whatever is left of the body is the caller's to drain or drop. busboy
      // is destroyed on the next turn, outside its own callbacks, which it does not survive.
      parser.on('error', () => {});
      setImmediate(() => parser.destroy());
      reject(error);
    }

    // busboy bounds each part but not the bytes between them: count the whole body too.
    function countBytes(chunk: Buffer): void {
      received += chunk.length;
      if (received > maxBytes) {
        fail(new ApiError('upload_too_large', { detail: `The upload is larger than ${limits.maxTotalBytes} bytes.` }));
      }
    }

    parser.on('file', (name, stream, info) => {
      if (largeNext && largeField) {
        largeNext = false;
        stream.on('error', () => {});
        if (++fieldCount > limits.maxFields) {
          stream.resume();
          fail(new ApiError('too_many_fields'));
          return;
        }
        const entry = { bytes: new UploadBytes(capacity > 0 ? Math.min(declaredLength, largeField.maxBytes + 1) : 0), done: false };
        large = entry;
        let partBytes = 0;
        let truncated = false;
        stream.on('data', (chunk: Buffer) => {
          partBytes += chunk.length;
          // As busboy's fieldSize did: the rest of a field too long is read past, and refused at its end.
          if (partBytes > largeField.maxBytes) truncated = true;
          else entry.bytes.push(chunk);
        });
        stream.on('limit', () => (truncated = true));
        stream.on('end', () => {
          entry.done = true;
          if (truncated) fail(fieldTooLarge(largeField.name));
          else if (large === entry) fields[largeField.name] = entry.bytes.length > 0 ? STREAMED_FIELD : '';
        });
        return;
      }
      if (streaming && ++fileParts > limits.maxFiles + extraCount) {
        stream.on('error', () => {});
        stream.resume();
        fail(tooManyFiles());
        return;
      }
      if (name !== fileField && Object.hasOwn(extraFiles, name)) {
        stream.on('error', () => {});
        if (extras.has(name)) {
          stream.resume();
          fail(new ApiError('too_many_files', { detail: `Send at most one part named "${name}".` }));
          return;
        }
        const maxPartBytes = extraFiles[name]!;
        const entry = { info: { filename: info.filename ?? '', declaredType: info.mimeType }, chunks: [] as Buffer[], done: false };
        extras.set(name, entry);
        let partBytes = 0;
        const tooLarge = () => fail(new ApiError('upload_too_large', { detail: `The part "${name}" is larger than ${maxPartBytes} bytes.` }));
        stream.on('data', (chunk: Buffer) => {
          entry.chunks.push(chunk);
          partBytes += chunk.length;
          if (partBytes > maxPartBytes) tooLarge();
        });
        stream.on('limit', tooLarge);
        stream.on('end', () => {
          entry.done = true;
        });
        return;
      }
      if (name !== fileField) {
        stream.on('error', () => {});
        stream.resume();
        fail(new ApiError('unexpected_file_field', { detail: `Got a file in "${name}"; send it in the part named "${fileField}".` }));
        return;
      }
      // busboy's `files` counts the optional parts too: the image parts are counted here. (Only
      // forms with optional parts get here, and those are one-image forms: the catalogue's words.)
      if (files.length >= limits.maxFiles) {
        stream.resume();
        fail(new ApiError('too_many_files'));
        return;
      }
      const entry = { info: { filename: info.filename ?? '', declaredType: info.mimeType }, bytes: new UploadBytes(capacity), done: false };
      files.push(entry);
      stream.on('error', () => {}); // reported through the parser's own 'error'
      let partBytes = 0;
      stream.on('data', (chunk: Buffer) => {
        entry.bytes.push(chunk);
        fileBytes += chunk.length;
        partBytes += chunk.length;
        // busboy's fileSize is the largest of all file parts': this part's own limit is checked here.
        if (partBytes > limits.maxFileBytes) fail(new ApiError('upload_too_large', { detail: `The file is larger than ${limits.maxFileBytes} bytes.` }));
        if (limits.maxFiles > 1 && fileBytes > limits.maxTotalBytes) fail(new ApiError('upload_too_large', { detail: `The files are larger than ${limits.maxTotalBytes} bytes together.` }));
      });
      stream.on('limit', () =>
        fail(new ApiError('upload_too_large', { detail: `The file is larger than ${limits.maxFileBytes} bytes.` })),
      );
      stream.on('end', () => {
        entry.done = true;
      });
    });
    parser.on('field', (partName, value, info) => {
      // busboy gives no name (undefined) for a part whose Content-Disposition has none.
      const name = partName ?? '';
      if (streaming && ++fieldCount > limits.maxFields) {
        fail(new ApiError('too_many_fields'));
        return;
      }
      const tooLong = name !== largeField?.name && Buffer.byteLength(value) > limits.maxFieldBytes;
      if (info.nameTruncated || info.valueTruncated || tooLong) {
        fail(fieldTooLarge(name));
        return;
      }
      // The large field sent again, whole this time (a charset of its own): its last value is kept.
      if (name === largeField?.name) large = undefined;
      if (name === fileField) {
        fail(new ApiError('missing_file', { detail: `The part named "${fileField}" is a text field, not a file: send it with a filename.` }));
        return;
      }
      fields[name] = value;
    });
    parser.on('filesLimit', () => fail(tooManyFiles()));
    parser.on('fieldsLimit', () => fail(new ApiError('too_many_fields')));
    parser.on('partsLimit', () => fail(new ApiError('too_many_fields')));
    parser.on('error', (error: Error) => fail(new ApiError('malformed_multipart', { detail: error.message, cause: error })));
    parser.on('close', () => {
      if (settled) return;
      if ([...extras.values()].some((part) => !part.done) || (large && !large.done)) {
        fail(new ApiError('malformed_multipart', { detail: 'A part ended early.' }));
        return;
      }
      const parts = {
        ...(extras.size > 0 ? { parts: Object.fromEntries([...extras].map(([name, part]) => [name, { ...part.info, file: Buffer.concat(part.chunks) }])) } : {}),
        ...(large && large.bytes.length > 0 ? { largeFieldBytes: large.bytes.bytes() } : {}),
      };
      if (files.length === 0 && shape.fileAlternatives?.some((name) => fields[name] !== undefined)) {
        settled = true;
        cleanup();
        resolve({ files: [], fields, ...parts });
        return;
      }
      if (files.length === 0 || files.some((f) => !f.done)) {
        fail(new ApiError('missing_file'));
        return;
      }
      const read = files.map((f) => ({ ...f.info, file: f.bytes.bytes() }));
      const empty = read.findIndex((f) => f.file.length === 0);
      if (empty >= 0) {
        fail(new ApiError('missing_file', { detail: read.length > 1 ? `File part ${empty + 1} named "${fileField}" is empty.` : `The part named "${fileField}" is empty.` }));
        return;
      }
      settled = true;
      cleanup();
      resolve({ files: read, fields, ...parts });
    });
    // Not body.pipe(parser): that parses whatever one turn of the event loop delivers (a whole
    // photo from a fast client) in one synchronous block; see feed-in-slices.ts.
    feed = feedInSlices(body, parser, countBytes);
  });
}
