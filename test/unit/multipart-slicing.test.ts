import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { PARSE_SLICE_BYTES } from '../../src/core/feed-in-slices.js';
import { readUpload } from '../../src/core/multipart.js';

// The multipart reader must not parse a large body in one synchronous block (issue 26: the
// longest event-loop block during a 24 MP cutout). Structure, not wall time: busboy's `write` is
// wrapped to count the bytes it is handed, and a setImmediate ticker marks the turns of the event
// loop; no turn may see more than PARSE_SLICE_BYTES handed to the parser.

const written: { tick: number; bytes: number }[] = [];
let tick = 0;

vi.mock('busboy', async (importOriginal) => {
  const real = ((await importOriginal()) as { default: (config: unknown) => NodeJS.WritableStream }).default;
  return {
    default: (config: unknown) => {
      const parser = real(config);
      const write = parser.write.bind(parser) as (chunk: Buffer, ...rest: unknown[]) => boolean;
      parser.write = ((chunk: Buffer, ...rest: unknown[]) => {
        written.push({ tick, bytes: chunk.length });
        return write(chunk, ...rest);
      }) as typeof parser.write;
      return parser;
    },
  };
});

const BOUNDARY = '----slicing-boundary-7f3a';
const LIMITS = { maxFileBytes: 30 * 1024 * 1024, maxFields: 4, maxFieldBytes: 100 };

function body(file: Buffer): Buffer {
  return Buffer.concat([
    Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="size"\r\n\r\npreview\r\n`),
    Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="big.jpg"\r\nContent-Type: image/jpeg\r\n\r\n`),
    file,
    Buffer.from(`\r\n--${BOUNDARY}--\r\n`),
  ]);
}

/** Reads `chunks` while a setImmediate ticker counts the turns; returns the upload and the most bytes one turn handed to the parser. */
async function readCountingTurns(chunks: Buffer[], declaredLength: number) {
  written.length = 0;
  tick = 0;
  let ticking = true;
  const ticker = () => {
    tick++;
    if (ticking) setImmediate(ticker);
  };
  setImmediate(ticker);
  const headers = { 'content-type': `multipart/form-data; boundary=${BOUNDARY}`, 'content-length': String(declaredLength) };
  const upload = await readUpload(Readable.from(chunks), headers, LIMITS, new AbortController().signal).finally(() => {
    ticking = false;
  });
  const perTurn = new Map<number, number>();
  for (const { tick: turn, bytes } of written) perTurn.set(turn, (perTurn.get(turn) ?? 0) + bytes);
  return { upload, mostInOneTurn: Math.max(...perTurn.values()), turns: perTurn.size, total: written.reduce((sum, w) => sum + w.bytes, 0) };
}

describe('multipart reader: parses a large body in bounded slices, one per turn of the event loop', () => {
  const file = randomBytes(24 * 1024 * 1024);
  const whole = body(file);
  afterEach(() => {
    written.length = 0;
  });

  it('a 24 MB body arriving as one chunk: at most PARSE_SLICE_BYTES per turn, the file bytes identical', async () => {
    const { upload, mostInOneTurn, turns, total } = await readCountingTurns([whole], whole.length);
    expect(total).toBe(whole.length);
    expect(mostInOneTurn).toBeLessThanOrEqual(PARSE_SLICE_BYTES);
    expect(turns).toBeGreaterThanOrEqual(Math.ceil(whole.length / PARSE_SLICE_BYTES));
    expect(upload.fields).toEqual({ size: 'preview' });
    expect(upload.file.equals(file)).toBe(true);
  });

  it('a 24 MB body arriving as many chunks in one turn (as a fast socket delivers them): still at most PARSE_SLICE_BYTES per turn', async () => {
    const chunks: Buffer[] = [];
    for (let offset = 0; offset < whole.length; offset += 48 * 1024 + 7) chunks.push(whole.subarray(offset, offset + 48 * 1024 + 7));
    // Readable.from hands a synchronous iterable's items over as fast as they are read: many per turn.
    const { upload, mostInOneTurn, total } = await readCountingTurns(chunks, whole.length);
    expect(total).toBe(whole.length);
    expect(mostInOneTurn).toBeLessThanOrEqual(PARSE_SLICE_BYTES);
    expect(upload.file.equals(file)).toBe(true);
  });
});
