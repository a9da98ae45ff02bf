import { PassThrough } from 'node:stream';
import type { CoreRequest } from '../../src/core/index.js';

export interface DrivenRequest {
  request: CoreRequest;
  /** The body as the client sends it: write to it, end it, or leave it hanging. */
  body: PassThrough;
  /** The client goes away. */
  abort(): void;
}

/** A CoreRequest driven by the test, with no HTTP server in between: the client's side of it is in the test's hands. */
export function drivenRequest(options: { key?: string; url?: string; headers?: Record<string, string>; contentType?: string } = {}): DrivenRequest {
  const body = new PassThrough();
  const controller = new AbortController();
  const request: CoreRequest = {
    method: 'POST',
    url: options.url ?? '/v1/remove-bg',
    headers: {
      ...(options.key ? { 'x-api-key': options.key } : {}),
      'content-type': options.contentType ?? 'multipart/form-data; boundary=----never-sent',
      ...options.headers,
    },
    body,
    signal: controller.signal,
  };
  return {
    request,
    body,
    abort() {
      controller.abort();
      body.destroy();
    },
  };
}

/** A whole multipart form (fixtures.ts's multipartBody), sent at once with its Content-Length, to `url`. */
export function formRequest(key: string, form: { body: Buffer; contentType: string }, url?: string): DrivenRequest {
  const driven = drivenRequest({ key, contentType: form.contentType, headers: { 'content-length': String(form.body.length) }, ...(url ? { url } : {}) });
  driven.body.end(form.body);
  return driven;
}

/**
 * A whole upload of one image, sent at once. The file name goes in `filename="..."` as browsers
 * send it (UTF-8 bytes), or with `extended` in RFC 5987's `filename*=UTF-8''...` form.
 */
export function uploadRequest(key: string, image: Buffer, filename = 'photo.jpg', extended = false): DrivenRequest {
  const boundary = `----bgcut${Math.random().toString(16).slice(2)}`;
  const name = extended ? `filename*=UTF-8''${encodeURIComponent(filename)}` : `filename="${filename}"`;
  const body = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; ${name}\r\nContent-Type: image/jpeg\r\n\r\n`),
    image,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  const driven = drivenRequest({ key, contentType: `multipart/form-data; boundary=${boundary}` });
  driven.request.headers['content-length'] = String(body.length);
  driven.body.end(body);
  return driven;
}

/** Resolves after `ms`, for waiting on something that must NOT happen. */
export const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
