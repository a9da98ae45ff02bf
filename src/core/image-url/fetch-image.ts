import type http from 'node:http';
import { isIP } from 'node:net';
import { BodyReadError, readBody } from '../../util/read-body.js';
import { ApiError, type ErrorCode } from '../errors.js';
import { checkAddress } from './address-policy.js';
import { pinnedRequest } from './pinned-request.js';
import { hostAllowed, MAX_REDIRECTS, MAX_URL_LENGTH, type ResolvedImageUrlOptions } from './options.js';

export interface FetchedImage {
  file: Buffer;
  /** The last path segment of the final URL, for the result's file name. */
  filename: string;
  /** What the server declared: informative only, the type is sniffed from the bytes. */
  declaredType: string;
}

/**
 * What the API refused or failed to fetch, with the specifics the caller is not told (which
 * address a name resolved to, the errno): for the operator, through onInternalError.
 */
export class ImageUrlRefusal extends Error {
  override readonly name = 'ImageUrlRefusal';
}

export interface FetchImageOptions extends ResolvedImageUrlOptions {
  maxBytes: number;
  signal: AbortSignal;
  /** Told the specifics of a refusal whose answer to the caller is generic. */
  onRefusal?: ((refusal: ImageUrlRefusal) => void) | undefined;
}

/**
 * Fetches an image by URL on a caller's behalf without letting the caller reach anything the
 * API's host can but they should not (server-side request forgery), nor use the API to map the
 * network (a scanner). Each hop: http(s) only, no https->http downgrade, no credentials, the
 * allowed ports (80 and 443 by default), the host allow-list; the name resolved once and every
 * address checked; the connection made to that checked address (no second lookup for DNS
 * rebinding to switch); at most MAX_REDIRECTS redirects, each checked the same way; the body
 * capped at `maxBytes` and everything at `timeoutMs`. Refusals are one generic answer per class
 * (a name that does not resolve, a private address and a refused connection all read
 * `image_url_unreachable`); the specifics go to `onRefusal`. The image type is left to the
 * caller to sniff from the bytes.
 */
export async function fetchImage(rawUrl: string, options: FetchImageOptions): Promise<FetchedImage> {
  const timeout = AbortSignal.timeout(options.timeoutMs);
  const signal = AbortSignal.any([options.signal, timeout]);
  const refuse = (code: ErrorCode, specifics: string, cause?: unknown): ApiError => {
    options.onRefusal?.(new ImageUrlRefusal(`image_url refused as ${code}: ${specifics}`, { cause }));
    return new ApiError(code, { cause });
  };
  let url = parseUrl(rawUrl, options);
  try {
    for (let redirects = 0; ; redirects++) {
      const target = await checkTarget(url, options, refuse);
      signal.throwIfAborted();
      const response = await get(url, target, signal);
      const status = response.statusCode ?? 0;
      const location = response.headers.location;
      if ([301, 302, 303, 307, 308].includes(status) && location) {
        response.destroy();
        if (redirects >= MAX_REDIRECTS) throw new ApiError('image_url_too_many_redirects');
        url = nextHop(url, location, options, refuse);
        continue;
      }
      if (status < 200 || status > 299) {
        response.destroy();
        throw refuse('image_url_http_error', `${url.host} answered ${status}`);
      }
      const file = await readImageBody(response, options.maxBytes, signal, refuse);
      return { file, filename: filenameOf(url), declaredType: String(response.headers['content-type'] ?? '') };
    }
  } catch (error) {
    if (options.signal.aborted) throw options.signal.reason;
    if (timeout.aborted) throw new ApiError('image_url_timeout', { detail: `The image did not arrive within ${options.timeoutMs} ms.` });
    if (error instanceof ApiError) throw error;
    throw refuse('image_url_unreachable', `connecting to ${url.host} failed (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`, error);
  }
}

/** Where a redirect leads, checked as the first URL was, and never from https down to http. */
export function nextHop(from: URL, location: string, options: ResolvedImageUrlOptions, refuse: Refuse): URL {
  const next = parseUrl(location, options, from);
  if (from.protocol === 'https:' && next.protocol === 'http:') throw refuse('image_url_scheme_not_allowed', `a redirect from ${from.origin} downgrades to ${next.origin}`);
  return next;
}

/** The last path segment of the URL, decoded when it decodes (a stray `%` is kept as it is), for the result's file name. */
function filenameOf(url: URL): string {
  const segment = url.pathname.split('/').pop() || '';
  try {
    return decodeURIComponent(segment) || 'image';
  } catch {
    return segment;
  }
}

function parseUrl(raw: string, options: ResolvedImageUrlOptions, base?: URL): URL {
  if (raw.length > MAX_URL_LENGTH) throw new ApiError('image_url_invalid', { detail: `image_url is longer than ${MAX_URL_LENGTH} characters.` });
  let url: URL;
  try {
    url = new URL(raw, base);
  } catch {
    throw new ApiError('image_url_invalid', { detail: `${base ? 'A redirect\'s Location' : 'image_url'} is not a URL.` });
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ApiError('image_url_scheme_not_allowed');
  if (url.username || url.password) throw new ApiError('image_url_invalid', { detail: 'image_url may not carry a user name or password.' });
  const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
  if (!options.allowedPorts.includes(port)) throw new ApiError('image_url_port_not_allowed');
  return url;
}

export type Refuse = (code: ErrorCode, specifics: string, cause?: unknown) => ApiError;

/** The address to connect to for this URL, once the name is resolved and every address checked. */
async function checkTarget(url: URL, options: ResolvedImageUrlOptions, refuse: Refuse): Promise<{ address: string; family: number }> {
  // The WHATWG parser has already turned 2130706433, 0x7f.1 and 127.1 into 127.0.0.1.
  const hostname = url.hostname.replace(/^\[|\]$/g, '');
  if (!hostAllowed(hostname, options.allowedHosts)) throw new ApiError('image_url_host_not_allowed');
  let addresses: { address: string; family: number }[];
  if (isIP(hostname)) addresses = [{ address: hostname, family: isIP(hostname) }];
  else {
    try {
      addresses = await options.resolver(hostname);
    } catch (error) {
      throw refuse('image_url_unreachable', `"${hostname.slice(0, 100)}" could not be resolved (${(error as NodeJS.ErrnoException).code ?? 'lookup failed'})`, error);
    }
    if (addresses.length === 0) throw refuse('image_url_unreachable', `"${hostname.slice(0, 100)}" has no address`);
  }
  for (const { address } of addresses) {
    const verdict = checkAddress(address, { allowLoopback: options.allowLoopbackForTesting });
    if (!verdict.allowed) throw refuse('image_url_unreachable', `"${hostname.slice(0, 100)}" is ${address}, ${verdict.reason}, which is never fetched`);
  }
  return addresses[0]!;
}
/** One GET to the checked address, naming the host in Host and (for TLS) SNI and the certificate check. */
function get(url: URL, target: { address: string; family: number }, signal: AbortSignal): Promise<http.IncomingMessage> {
  return pinnedRequest({ url, ...target }, { method: 'GET', headers: { accept: 'image/*', 'user-agent': 'bgcut-image-fetch' }, signal });
}

/** The image's bytes, within the cap; a connection that ends mid-image is `image_url_unreachable`. */
async function readImageBody(response: http.IncomingMessage, maxBytes: number, signal: AbortSignal, refuse: Refuse): Promise<Buffer> {
  try {
    return await readBody(response, { maxBytes, declaredLength: response.headers['content-length'], signal });
  } catch (error) {
    response.destroy();
    if (!(error instanceof BodyReadError)) throw error;
    if (error.reason === 'too_large') throw new ApiError('image_url_too_large', { detail: `The image is larger than ${maxBytes} bytes.` });
    throw refuse('image_url_unreachable', `the image's server ended the body early (${error.message})`, error);
  }
}
