import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { ApiError } from '../errors.js';
import { checkAddress } from './address-policy.js';
import { hostAllowed, MAX_REDIRECTS, MAX_URL_LENGTH, type ResolvedImageUrlOptions } from './options.js';

export interface FetchedImage {
  file: Buffer;
  /** The last path segment of the final URL, for the result's file name. */
  filename: string;
  /** What the server declared: informative only, the type is sniffed from the bytes. */
  declaredType: string;
}

/**
 * Fetches an image by URL on a caller's behalf without letting the caller reach anything the
 * API's host can but they should not (server-side request forgery). Each hop: http(s) only, no
 * credentials, the allow-list; the name resolved once and every address checked; the
 * connection made to that checked address (no second lookup for DNS rebinding to switch); at
 * most MAX_REDIRECTS redirects, each checked the same way; the body capped at `maxBytes` and
 * everything at `timeoutMs`. The image type is left to the caller to sniff from the bytes.
 */
export async function fetchImage(rawUrl: string, options: ResolvedImageUrlOptions & { maxBytes: number; signal: AbortSignal }): Promise<FetchedImage> {
  const timeout = AbortSignal.timeout(options.timeoutMs);
  const signal = AbortSignal.any([options.signal, timeout]);
  let url = parseUrl(rawUrl);
  try {
    for (let redirects = 0; ; redirects++) {
      const target = await checkTarget(url, options);
      signal.throwIfAborted();
      const response = await get(url, target, signal);
      const location = response.headers.location;
      if ([301, 302, 303, 307, 308].includes(response.statusCode ?? 0) && location) {
        response.destroy();
        if (redirects >= MAX_REDIRECTS) throw new ApiError('image_url_too_many_redirects', { detail: `More than ${MAX_REDIRECTS} redirects.` });
        url = parseUrl(location, url);
        continue;
      }
      if ((response.statusCode ?? 0) < 200 || (response.statusCode ?? 0) > 299) {
        response.destroy();
        throw new ApiError('image_url_http_error', { detail: `The image's server answered ${response.statusCode}.` });
      }
      const file = await readCapped(response, options.maxBytes);
      return { file, filename: decodeURIComponent(url.pathname.split('/').pop() || '') || 'image', declaredType: String(response.headers['content-type'] ?? '') };
    }
  } catch (error) {
    if (options.signal.aborted) throw options.signal.reason;
    if (timeout.aborted) throw new ApiError('image_url_timeout', { detail: `The image did not arrive within ${options.timeoutMs} ms.` });
    if (error instanceof ApiError) throw error;
    throw new ApiError('image_url_unreachable', { detail: `The image's server could not be reached (${(error as NodeJS.ErrnoException).code ?? 'connection failed'}).`, cause: error });
  }
}

function parseUrl(raw: string, base?: URL): URL {
  if (raw.length > MAX_URL_LENGTH) throw new ApiError('image_url_invalid', { detail: `image_url is longer than ${MAX_URL_LENGTH} characters.` });
  let url: URL;
  try {
    url = new URL(raw, base);
  } catch {
    throw new ApiError('image_url_invalid', { detail: `${base ? 'A redirect\'s Location' : 'image_url'} is not a URL.` });
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ApiError('image_url_scheme_not_allowed', { detail: `Only http and https URLs are fetched, not ${url.protocol.slice(0, 20)}` });
  }
  if (url.username || url.password) throw new ApiError('image_url_invalid', { detail: 'image_url may not carry a user name or password.' });
  return url;
}

/** The address to connect to for this URL, once the name is resolved and every address checked. */
async function checkTarget(url: URL, options: ResolvedImageUrlOptions): Promise<{ address: string; family: number }> {
  // The WHATWG parser has already turned 2130706433, 0x7f.1 and 127.1 into 127.0.0.1.
  const hostname = url.hostname.replace(/^\[|\]$/g, '');
  if (!hostAllowed(hostname, options.allowedHosts)) {
    throw new ApiError('image_url_host_not_allowed', { detail: `The host "${hostname.slice(0, 100)}" is not on this API's list of image hosts.` });
  }
  let addresses: { address: string; family: number }[];
  if (isIP(hostname)) addresses = [{ address: hostname, family: isIP(hostname) }];
  else {
    try {
      addresses = await options.resolver(hostname);
    } catch (error) {
      throw new ApiError('image_url_unresolvable', { detail: `The host "${hostname.slice(0, 100)}" could not be resolved.`, cause: error });
    }
    if (addresses.length === 0) throw new ApiError('image_url_unresolvable', { detail: `The host "${hostname.slice(0, 100)}" has no address.` });
  }
  for (const { address } of addresses) {
    const verdict = checkAddress(address, { allowLoopback: options.allowLoopbackForTesting });
    if (!verdict.allowed) {
      throw new ApiError('image_url_address_not_allowed', { detail: `The host "${hostname.slice(0, 100)}" is ${verdict.reason}, which this API does not fetch from.` });
    }
  }
  return addresses[0]!;
}

/** One GET to the checked address, naming the host in Host and (for TLS) SNI and the certificate check. */
function get(url: URL, target: { address: string; family: number }, signal: AbortSignal): Promise<http.IncomingMessage> {
  const secure = url.protocol === 'https:';
  const hostname = url.hostname.replace(/^\[|\]$/g, '');
  return new Promise((resolve, reject) => {
    const request = (secure ? https : http).request({
      host: target.address,
      family: target.family,
      port: url.port || (secure ? 443 : 80),
      path: `${url.pathname}${url.search}`,
      method: 'GET',
      headers: { host: url.host, accept: 'image/*', 'user-agent': 'bgcut-image-fetch' },
      agent: false,
      signal,
      ...(secure && !isIP(hostname) ? { servername: hostname } : {}),
    });
    request.once('response', resolve);
    request.once('error', reject);
    request.end();
  });
}

function readCapped(response: http.IncomingMessage, maxBytes: number): Promise<Buffer> {
  const tooLarge = () => new ApiError('image_url_too_large', { detail: `The image is larger than ${maxBytes} bytes.` });
  const declared = Number(response.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) {
    response.destroy();
    return Promise.reject(tooLarge());
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    response.on('data', (chunk: Buffer) => {
      received += chunk.length;
      if (received > maxBytes) {
        response.destroy();
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    });
    response.once('end', () => resolve(Buffer.concat(chunks)));
    response.once('error', reject);
    response.once('close', () => {
      if (!response.complete) reject(new ApiError('image_url_unreachable', { detail: 'The image\'s server closed the connection mid-image.' }));
    });
  });
}
