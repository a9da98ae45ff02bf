/**
 * Fuzzing the request path with fast-check, shared by `npm test` (test/fuzz.test.ts, a few
 * thousand cases) and `npm run stress` (bench/stress.ts, 100 000+). Cases go straight into the
 * core handler (no HTTP server), so most of them are refused in well under a millisecond; the few
 * image mutations that decode reach the real inference server.
 *
 * The property: every answer is a defined status with a problem+json body naming a catalogued
 * code (or a 200 image), never a 500, a hang or an unexpected rejection.
 */
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import fc from 'fast-check';
import sharp from 'sharp';
import {
  createRemoveBgHandler,
  ERROR_CATALOG,
  FileKeyStore,
  generateApiKey,
  type CoreRequest,
  type CoreResponse,
  type IncomingHeaders,
  type Plans,
  type RemoveBgHandler,
} from '../../src/core/index.js';
import { captureInternalError, recordIssuedKeys } from './log-capture.js';

export const FUZZ_PLANS: Plans = {
  // Rate limits high enough that fuzzing never turns into a run of 429s.
  roomy: { requestsPerMinute: 100_000_000 },
  // Every real image is refused after the header probe, before any decoding or inference.
  probe_only: { requestsPerMinute: 100_000_000, maxInputMegapixels: 0.000001 },
  limited_options: { requestsPerMinute: 100_000_000, outputOptions: ['format', 'size'], maxInputMegapixels: 0.000001 },
};

export interface FuzzKeys {
  roomy: string;
  probeOnly: string;
  limitedOptions: string;
  suspended: string;
  expired: string;
  store: FileKeyStore;
}

export async function createFuzzKeys(): Promise<FuzzKeys> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-fuzz-keys-'));
  const store = new FileKeyStore({ file: path.join(dir, 'keys.json'), reloadIntervalMs: 0 });
  const roomy = (await store.createKey({ accountId: 'acct_fuzz_roomy', plan: 'roomy' })).key;
  const probeOnly = (await store.createKey({ accountId: 'acct_fuzz_probe', plan: 'probe_only' })).key;
  const limitedOptions = (await store.createKey({ accountId: 'acct_fuzz_options', plan: 'limited_options' })).key;
  const suspended = (await store.createKey({ accountId: 'acct_fuzz_suspended', plan: 'roomy' })).key;
  await store.update((data) => {
    data.accounts.find((a) => a.id === 'acct_fuzz_suspended')!.status = 'suspended';
  });
  const expired = (await store.createKey({ accountId: 'acct_fuzz_expired', plan: 'roomy', expiresAt: new Date(Date.now() - 1000) })).key;
  recordIssuedKeys([roomy, probeOnly, limitedOptions, suspended, expired]);
  return { roomy, probeOnly, limitedOptions, suspended, expired, store };
}

/** Real images of every input format, generated in code, to mutate. */
export async function seedImages(): Promise<Buffer[]> {
  const width = 48;
  const height = 32;
  const rgb = Buffer.alloc(width * height * 3);
  for (let i = 0; i < width * height; i++) {
    const x = i % width;
    const y = Math.floor(i / width);
    const inside = (x - 24) ** 2 + (y - 16) ** 2 < 100;
    rgb[i * 3] = inside ? 220 : (x * 5) & 255;
    rgb[i * 3 + 1] = inside ? 40 : (y * 7) & 255;
    rgb[i * 3 + 2] = inside ? 40 : ((x + y) * 3) & 255;
  }
  const base = () => sharp(rgb, { raw: { width, height, channels: 3 } });
  return Promise.all([
    base().jpeg({ quality: 80 }).toBuffer(),
    base().jpeg({ quality: 80, progressive: true }).withMetadata({ orientation: 6 }).toBuffer(),
    base().png().toBuffer(),
    base().ensureAlpha().png({ palette: true }).toBuffer(),
    base().webp().toBuffer(),
    base().gif().toBuffer(),
    base().tiff().toBuffer(),
    base().avif({ effort: 0 }).toBuffer(),
  ]);
}

/** A CoreRequest whose body arrives in the given chunks, as an adapter would pass it. */
export function coreRequest(init: { method?: string; url?: string; headers: IncomingHeaders; chunks: Buffer[]; signal?: AbortSignal }): CoreRequest {
  return {
    method: init.method ?? 'POST',
    url: init.url ?? '/v1/remove-bg',
    headers: init.headers,
    body: Readable.from(init.chunks, { objectMode: false }),
    signal: init.signal ?? new AbortController().signal,
    clientIp: '127.0.0.1',
  };
}

// ---------------------------------------------------------------------------------------------
// Arbitraries

const bytes = (max: number) => fc.uint8Array({ maxLength: max }).map((a) => Buffer.from(a));
const text = (max: number) => fc.oneof(fc.string({ maxLength: max }), fc.string({ unit: 'grapheme', maxLength: max }), fc.string({ unit: 'binary', maxLength: max }));

/** Splits a buffer into chunks at random points (what a socket does to a body). */
const chunked = (data: Buffer) =>
  fc.array(fc.nat({ max: Math.max(0, data.length) }), { maxLength: 6 }).map((cuts) => {
    const points = [...new Set(cuts)].sort((a, b) => a - b);
    const chunks: Buffer[] = [];
    let at = 0;
    for (const p of points) {
      if (p > at) chunks.push(data.subarray(at, p));
      at = Math.max(at, p);
    }
    if (at < data.length) chunks.push(data.subarray(at));
    return chunks;
  });

interface Part {
  name: string | undefined;
  filename: string | undefined;
  type: string | undefined;
  extraHeaders: string[];
  data: Buffer;
}

function partArb(image: fc.Arbitrary<Buffer>): fc.Arbitrary<Part> {
  return fc.record({
    name: fc.option(fc.oneof(fc.constant('file'), fc.constant('format'), fc.constant('size'), fc.constant('File'), text(20)), { nil: undefined }),
    filename: fc.option(fc.oneof(fc.constant('photo.jpg'), text(300), fc.constant('\ud83d'), fc.constant('ph"o\\to.png'), fc.constant('../../etc/passwd')), { nil: undefined }),
    type: fc.option(fc.oneof(fc.constant('image/jpeg'), fc.constant('text/plain'), text(40)), { nil: undefined }),
    extraHeaders: fc.array(
      fc.oneof(
        fc.constant('Content-Transfer-Encoding: base64'),
        fc.constant('Content-Disposition: form-data; name="file"; filename="dup.png"'),
        text(60).map((t) => `X-${t}`),
        fc.constant(`X-Long: ${'a'.repeat(20_000)}`),
      ),
      { maxLength: 3 },
    ),
    data: fc.oneof({ weight: 3, arbitrary: bytes(400) }, { weight: 2, arbitrary: image }, { weight: 1, arbitrary: text(40).map((t) => Buffer.from(t)) }),
  });
}

function encodeParts(boundary: string, parts: Part[], close: boolean): Buffer {
  const chunks: Buffer[] = [];
  for (const part of parts) {
    const disposition =
      part.name === undefined ? 'form-data' : `form-data; name="${part.name}"${part.filename !== undefined ? `; filename="${part.filename}"` : ''}`;
    const head = [`--${boundary}`, `Content-Disposition: ${disposition}`, ...(part.type ? [`Content-Type: ${part.type}`] : []), ...part.extraHeaders, '', ''].join('\r\n');
    chunks.push(Buffer.from(head, 'utf8'), part.data, Buffer.from('\r\n'));
  }
  if (close) chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return Buffer.concat(chunks);
}

export interface FuzzCase {
  kind: 'multipart' | 'headers' | 'options' | 'image';
  method?: string;
  url?: string;
  headers: IncomingHeaders;
  chunks: Buffer[];
  /** Whether this case may reach the model (and so take seconds). */
  mayInfer: boolean;
}

/** Random multipart bodies: boundaries, part headers, sizes, truncations, garbage between parts. */
export function multipartCases(keys: FuzzKeys, images: Buffer[]): fc.Arbitrary<FuzzCase> {
  const boundary = fc.oneof(
    fc.constant('----bgcutFuzzBoundary'),
    fc.stringMatching(/^[A-Za-z0-9'()+_,\-./:=?]{1,70}$/),
    text(80),
    fc.constant(''),
    fc.constant('a'.repeat(500)),
  );
  const image = fc.constantFrom(...images);
  return fc
    .record({
      boundary,
      declaredBoundary: fc.option(text(30), { nil: undefined, freq: 8 }),
      contentType: fc.constantFrom('multipart/form-data; boundary=B', 'multipart/form-data; boundary="B"', 'multipart/form-data', 'MULTIPART/FORM-DATA;boundary=B', 'multipart/mixed; boundary=B', 'application/octet-stream', 'multipart/form-data; boundary=B; charset=utf-16', ''),
      parts: fc.array(partArb(image), { maxLength: 5 }),
      close: fc.boolean(),
      prefix: fc.option(bytes(64), { nil: undefined, freq: 6 }),
      truncateAt: fc.option(fc.double({ min: 0, max: 1, noNaN: true }), { nil: undefined, freq: 3 }),
      contentLength: fc.constantFrom('right', 'none', 'short', 'long', 'garbage', 'huge'),
    })
    .chain((c) => {
      const partsBytes = encodeParts(c.boundary, c.parts, c.close);
      let body = c.prefix ? Buffer.concat([c.prefix, partsBytes]) : partsBytes;
      if (c.truncateAt !== undefined) body = body.subarray(0, Math.floor(body.length * c.truncateAt));
      const headers: IncomingHeaders = { 'x-api-key': keys.probeOnly };
      if (c.contentType) headers['content-type'] = c.contentType.replace('B', c.declaredBoundary ?? c.boundary);
      const length = { right: String(body.length), none: undefined, short: String(Math.max(0, body.length - 10)), long: String(body.length + 10), garbage: 'x12', huge: '99999999999999' }[c.contentLength];
      if (length !== undefined) headers['content-length'] = length;
      return chunked(body).map((chunks): FuzzCase => ({ kind: 'multipart', headers, chunks, mayInfer: false }));
    });
}

/** Random header sets: key variants and placements, duplicates, huge and odd values. */
export function headerCases(keys: FuzzKeys, images: Buffer[]): fc.Arbitrary<FuzzCase> {
  const someKey = fc.constantFrom(keys.probeOnly, keys.suspended, keys.expired, generateApiKey());
  const keyValue = fc.oneof(
    someKey,
    someKey.map((k) => ` ${k} `),
    someKey.map((k) => k.slice(0, -1)),
    someKey.map((k) => k.toUpperCase()),
    fc.tuple(someKey, fc.nat(60), fc.integer({ min: 32, max: 126 })).map(([k, i, c]) => k.slice(0, i) + String.fromCharCode(c) + k.slice(i + 1)),
    someKey.map((k) => `${k}, ${k}`),
    someKey.map((k) => `Bearer ${k}`),
    fc.constant(''),
    fc.constant('bgk_'),
    fc.constant('x'.repeat(100_000)),
    text(200),
  );
  const value = fc.oneof(keyValue, keyValue.map((v) => [v, v]), fc.array(keyValue, { maxLength: 3 }));
  const headerName = fc.constantFrom('x-api-key', 'authorization', 'x-api-token', 'api-key', 'apikey', 'x-auth-token', 'origin', 'accept', 'content-type', 'content-length', 'x-forwarded-for', 'cookie');
  return fc
    .record({
      key: fc.option(value, { nil: undefined, freq: 4 }),
      headers: fc.dictionary(headerName, value, { maxKeys: 4 }),
      query: fc.option(fc.tuple(fc.constantFrom('api_key', 'key', 'token', 'format', 'x-api-key'), text(50)), { nil: undefined }),
      method: fc.oneof({ weight: 9, arbitrary: fc.constant('POST') }, { weight: 1, arbitrary: fc.constantFrom('GET', 'PUT', 'DELETE', 'OPTIONS', 'HEAD', 'post') }),
      image: fc.constantFrom(...images),
    })
    .map(({ key, headers, query, method, image }) => {
      const { body, contentType } = simpleForm(image);
      const all: IncomingHeaders = { 'content-type': contentType, ...(key === undefined ? {} : { 'x-api-key': key }), ...headers };
      // A header is a string (or, from adapters, a string[] for repeatable ones).
      for (const [name, v] of Object.entries(all)) if (Array.isArray(v) && name !== 'x-api-key') all[name] = v.join(', ');
      const url = query ? `/v1/remove-bg?${new URLSearchParams([query]).toString()}` : '/v1/remove-bg';
      return { kind: 'headers' as const, method, url, headers: all, chunks: [body], mayInfer: false };
    });
}

/** Random output options, in the query string and as form fields, against plans that limit them. */
export function optionCases(keys: FuzzKeys, images: Buffer[]): fc.Arbitrary<FuzzCase> {
  const name = fc.oneof(fc.constantFrom('format', 'channels', 'bg_color', 'crop', 'crop_margin', 'size', 'model', 'type', 'semitransparency'), text(12));
  const value = fc.oneof(
    fc.constantFrom('png', 'webp', 'jpg', 'jpeg', 'avif', 'gif', 'rgba', 'alpha', 'transparent', '#fff', '#ff000080', 'red', 'true', 'false', '1', '0', '10px', '50%', '101%', '-5px', '1e9px', 'preview', 'full', 'auto', 'isnet', 'nope', ''),
    text(40),
    fc.constant('9'.repeat(2000)),
  );
  const option = fc.tuple(name, value);
  return fc
    .record({
      query: fc.array(option, { maxLength: 4 }),
      fields: fc.array(option, { maxLength: 4 }),
      accept: fc.constantFrom(undefined, 'application/json', 'image/*', '*/*', 'text/html'),
      key: fc.constantFrom(keys.probeOnly, keys.limitedOptions),
      image: fc.constantFrom(...images),
    })
    .map(({ query, fields, accept, key, image }) => {
      const { body, contentType } = simpleForm(image, fields);
      const search = new URLSearchParams(query).toString();
      const headers: IncomingHeaders = { 'x-api-key': key, 'content-type': contentType, 'content-length': String(body.length) };
      if (accept) headers.accept = accept;
      return { kind: 'options' as const, url: `/v1/remove-bg${search ? `?${search}` : ''}`, headers, chunks: [body], mayInfer: false };
    });
}

/**
 * Mutations of real images: bit flips, overwritten and inserted bytes, cut and repeated spans,
 * size fields set huge. With `reachModel`, against an account that lets decodable images
 * through to the model; otherwise against one refused after the header probe.
 */
export function imageCases(keys: FuzzKeys, images: Buffer[], reachModel: boolean): fc.Arbitrary<FuzzCase> {
  const mutation = fc.oneof(
    fc.record({ op: fc.constant('flip' as const), at: fc.double({ min: 0, max: 1, noNaN: true }), bit: fc.nat(7) }),
    fc.record({ op: fc.constant('set' as const), at: fc.double({ min: 0, max: 1, noNaN: true }), byte: fc.nat(255) }),
    fc.record({ op: fc.constant('header' as const), at: fc.nat(40), byte: fc.constantFrom(0, 0xff, 0x7f, 0x80) }),
    fc.record({ op: fc.constant('truncate' as const), at: fc.double({ min: 0.02, max: 1, noNaN: true }) }),
    fc.record({ op: fc.constant('insert' as const), at: fc.double({ min: 0, max: 1, noNaN: true }), data: bytes(32) }),
    fc.record({ op: fc.constant('repeat' as const), at: fc.double({ min: 0, max: 1, noNaN: true }), length: fc.nat(200) }),
  );
  // Towards the model, fewer and milder mutations, so that some images still decode.
  const mutations = reachModel ? fc.array(mutation, { minLength: 0, maxLength: 2 }) : fc.array(mutation, { minLength: 1, maxLength: 4 });
  return fc.record({ image: fc.constantFrom(...images), mutations }).map(({ image, mutations }) => {
    let data = Buffer.from(image);
    for (const m of mutations) {
      const at = m.op === 'header' ? Math.min(m.at, Math.max(0, data.length - 1)) : Math.floor(m.at * data.length);
      if (data.length === 0) break;
      if (m.op === 'flip') data[Math.min(at, data.length - 1)]! ^= 1 << m.bit;
      else if (m.op === 'set' || m.op === 'header') data[Math.min(at, data.length - 1)] = m.byte;
      else if (m.op === 'truncate') data = data.subarray(0, at);
      else if (m.op === 'insert') data = Buffer.concat([data.subarray(0, at), m.data, data.subarray(at)]);
      else data = Buffer.concat([data.subarray(0, at + m.length), data.subarray(at)]);
    }
    const { body, contentType } = simpleForm(data);
    return {
      kind: 'image' as const,
      headers: { 'x-api-key': reachModel ? keys.roomy : keys.probeOnly, 'content-type': contentType, 'content-length': String(body.length) },
      chunks: [body],
      mayInfer: reachModel,
    };
  });
}

function simpleForm(file: Buffer, fields: [string, string][] = []): { body: Buffer; contentType: string } {
  const boundary = '----bgcutFuzzForm';
  const chunks: Buffer[] = [];
  for (const [name, value] of fields) {
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${name.replace(/["\r\n]/g, '_')}"\r\n\r\n${value}\r\n`));
  }
  chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="fuzz.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`), file, Buffer.from(`\r\n--${boundary}--\r\n`));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${boundary}` };
}

// ---------------------------------------------------------------------------------------------
// The property

const DEFINED_STATUSES = new Set<number>([200, ...Object.values(ERROR_CATALOG).map((e) => e.status)].filter((s) => s !== 500));

/** Why an answer breaks the contract, or undefined when it keeps it. */
export function contractViolation(response: CoreResponse): string | undefined {
  if (!DEFINED_STATUSES.has(response.status)) return `undefined status ${response.status}`;
  if (response.status === 200) {
    return /^(image\/|application\/json)/.test(response.headers['content-type'] ?? '') ? undefined : `200 with content-type ${response.headers['content-type']}`;
  }
  if (response.headers['content-type'] !== 'application/problem+json') return `${response.status} without problem+json`;
  let problem: { code?: string; status?: number };
  try {
    problem = JSON.parse(response.body.toString('utf8'));
  } catch {
    return `${response.status} with a body that is not JSON`;
  }
  if (!problem.code || !Object.hasOwn(ERROR_CATALOG, problem.code)) return `unknown code ${problem.code}`;
  if (problem.status !== response.status) return `code ${problem.code} says ${problem.status}, status is ${response.status}`;
  if (response.headers['content-length'] !== String(response.body.length)) return 'content-length does not match the body';
  return undefined;
}

export interface FuzzStats {
  cases: number;
  byKind: Record<string, number>;
  byStatus: Record<string, number>;
  /** Cases that reached the model. */
  inferred: number;
  internalErrors: unknown[];
}

export function newStats(): FuzzStats {
  return { cases: 0, byKind: {}, byStatus: {}, inferred: 0, internalErrors: [] };
}

/** One case through the handler, failing on a contract violation or a hang. */
export async function runCase(handler: RemoveBgHandler, c: FuzzCase, stats: FuzzStats, hangMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${hangMs} ms (hang)`)), hangMs);
  });
  let response: CoreResponse;
  try {
    response = await Promise.race([handler.handle(coreRequest(c)), hang]);
  } finally {
    clearTimeout(timer);
  }
  stats.cases++;
  stats.byKind[c.kind] = (stats.byKind[c.kind] ?? 0) + 1;
  let code = '';
  if (response.status !== 200 && response.headers['content-type'] === 'application/problem+json') {
    try {
      code = ` ${JSON.parse(response.body.toString()).code}`;
    } catch {
      /* reported by contractViolation */
    }
  }
  const label = `${c.kind}${c.mayInfer ? '+model' : ''} ${response.status}${code}`;
  stats.byStatus[label] = (stats.byStatus[label] ?? 0) + 1;
  if (response.status === 200) stats.inferred++;
  const violation = contractViolation(response);
  if (violation) throw new Error(`${c.kind} case: ${violation}: ${response.body.toString('utf8').slice(0, 300)}`);
}

export function fuzzHandler(keys: FuzzKeys, inferenceAddress: string, stats: FuzzStats): RemoveBgHandler {
  return createRemoveBgHandler({
    keyStore: keys.store,
    plans: FUZZ_PLANS,
    inference: { address: inferenceAddress, timeoutMs: 60_000 },
    limits: { maxUploadBytes: 256 * 1024, maxInputPixels: 4_000_000, uploadTimeoutMs: 5_000, maxInFlight: 1_000 },
    onInternalError: (error) => {
      stats.internalErrors.push(error);
      captureInternalError(error);
    },
  });
}

/**
 * Sum of a metric's samples in Prometheus text, optionally only those whose labels contain `labels`.
 * Throws when the exposition does not declare the metric (`# TYPE`, of the name or, for a
 * histogram's `_count`/`_sum`/`_bucket`, of its family): a renamed or removed metric must fail
 * the test that reads it, not read as 0. A declared metric with no matching sample is 0.
 */
export function metricValue(text: string, name: string, labels = ''): number {
  const family = name.replace(/_(count|sum|bucket)$/, '');
  const declared = text.split('\n').some((line) => line.startsWith(`# TYPE ${name} `) || line.startsWith(`# TYPE ${family} `));
  if (!declared) throw new Error(`metric ${name} is not in the exposition`);
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name) || line.startsWith('#')) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== ' ' && rest[0] !== '{') continue;
    if (labels && !rest.includes(labels)) continue;
    sum += Number(rest.slice(rest.lastIndexOf(' ') + 1));
  }
  return sum;
}
