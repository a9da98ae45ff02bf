/** What removeBackground takes: a file path, bytes, a Blob/File, a stream, or an image URL. */
export type ImageInput =
  | string
  | Uint8Array
  | ArrayBuffer
  | Blob
  | AsyncIterable<Uint8Array>
  | ReadableStream<Uint8Array>
  | { url: string };

export type PreparedInput = { kind: 'file'; blob: Blob; filename: string } | { kind: 'url'; url: string };

/**
 * The input as something every retry can send again: a path becomes a file-backed Blob (read
 * from disk on each send, not held in memory), a stream is read once into memory, up to
 * `maxBytes` (the API refuses larger uploads anyway).
 */
export async function prepareInput(input: ImageInput, filename: string | undefined, maxBytes: number): Promise<PreparedInput> {
  if (typeof input === 'string') {
    const [{ openAsBlob }, path] = await Promise.all([import('node:fs'), import('node:path')]);
    return { kind: 'file', blob: await openAsBlob(input), filename: filename ?? path.basename(input) };
  }
  if (isUrlInput(input)) return { kind: 'url', url: input.url };
  if (input instanceof Blob) {
    return { kind: 'file', blob: input, filename: filename ?? ('name' in input && typeof input.name === 'string' && input.name ? input.name : 'image') };
  }
  if (input instanceof Uint8Array || input instanceof ArrayBuffer) return { kind: 'file', blob: new Blob([input]), filename: filename ?? 'image' };
  const chunks: Uint8Array[] = [];
  let total = 0;
  const iterable = isReadableStream(input) ? readableStreamChunks(input) : input;
  for await (const chunk of iterable) {
    total += chunk.length;
    if (total > maxBytes) throw new RangeError(`the input stream is larger than maxInputBytes (${maxBytes} bytes)`);
    chunks.push(chunk);
  }
  return { kind: 'file', blob: new Blob(chunks), filename: filename ?? 'image' };
}

function isUrlInput(input: unknown): input is { url: string } {
  return typeof input === 'object' && input !== null && typeof (input as { url?: unknown }).url === 'string' && !(Symbol.asyncIterator in input);
}

function isReadableStream(input: unknown): input is ReadableStream<Uint8Array> {
  return typeof (input as ReadableStream).getReader === 'function';
}

async function* readableStreamChunks(stream: ReadableStream<Uint8Array>): AsyncIterable<Uint8Array> {
  const reader = stream.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      yield value;
    }
  } finally {
    reader.releaseLock();
  }
}
