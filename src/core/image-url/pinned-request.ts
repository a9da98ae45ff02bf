import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';

/** A URL and the address its name resolved to and passed the address policy. */
export interface PinnedTarget {
  url: URL;
  address: string;
  family: number;
}

export interface PinnedRequestOptions {
  method: string;
  headers: Record<string, string>;
  body?: string | Buffer;
  signal: AbortSignal;
}

/**
 * One HTTP(S) request to the address already checked, never to a second lookup of the name (so
 * DNS rebinding cannot switch it to another): the URL's host in `Host`, and for TLS in SNI and
 * the certificate check; no agent (no connection reused across checks). Resolves with the
 * response once its head arrives; the caller reads or discards the body.
 */
export function pinnedRequest(target: PinnedTarget, options: PinnedRequestOptions): Promise<http.IncomingMessage> {
  const { url } = target;
  const secure = url.protocol === 'https:';
  const hostname = url.hostname.replace(/^\[|\]$/g, '');
  return new Promise((resolve, reject) => {
    const request = (secure ? https : http).request({
      host: target.address,
      family: target.family,
      port: url.port || (secure ? 443 : 80),
      path: `${url.pathname}${url.search}`,
      method: options.method,
      headers: { ...options.headers, host: url.host },
      agent: false,
      signal: options.signal,
      ...(secure && !isIP(hostname) ? { servername: hostname } : {}),
    });
    request.once('response', resolve);
    request.once('error', reject);
    request.end(options.body);
  });
}
