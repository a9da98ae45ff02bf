import { PassThrough } from 'node:stream';
import type { CoreRequest } from '../../src/core/index.js';
import { multipartBody } from './fixtures.js';

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

/** A whole upload of one image, sent at once. */
export function uploadRequest(key: string, image: Buffer, filename = 'photo.jpg'): DrivenRequest {
  const { body, contentType } = multipartBody([{ name: 'file', filename, type: 'image/jpeg', data: image }]);
  const driven = drivenRequest({ key, contentType });
  driven.request.headers['content-length'] = String(body.length);
  driven.body.end(body);
  return driven;
}

/** Resolves after `ms`, for waiting on something that must NOT happen. */
export const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
