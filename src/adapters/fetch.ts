import { Readable } from 'node:stream';
import type { ReadableStream as NodeReadableStream } from 'node:stream/web';
import { ApiError, createRemoveBgHandler, problemOf, type RemoveBgHandler, type RemoveBgOptions } from '../core/index.js';
import type { CoreResponse, IncomingHeaders } from '../core/http-types.js';
import { mountedRoutes } from '../openapi/routes.js';
import { responseCopiesBody } from './response-copies-body.js';

export interface FetchAdapterOptions {
  /** Path the routes are mounted below, e.g. `/api` serves `POST /api/v1/remove-bg`. Default ''. */
  prefix?: string;
}

/** What the host knows about a request that a fetch Request does not carry. */
export interface RequestInfo {
  /**
   * The client's address, after the host's trusted-proxy rules (Hono on Node:
   * `getConnInfo(c).remote.address`). Keys limited to addresses are refused without it.
   */
  clientIp?: string | undefined;
}

/** A WHATWG fetch handler: mounts in Hono, Next.js route handlers, Bun, Deno and the like. */
export type FetchHandler = (request: Request, info?: RequestInfo) => Promise<Response>;

/**
 * `(request: Request) => Promise<Response>` over the same core as the Express and Fastify
 * adapters. Answers the routes under `prefix`; any other path gets 404 `not_found` (problem+json),
 * so hosts that route by prefix (`app.all('/api/*', ...)`) can hand everything below it over.
 */
export function createFetchHandler(handlerOrOptions: RemoveBgHandler | RemoveBgOptions, options: FetchAdapterOptions = {}): FetchHandler {
  const handler = 'handle' in handlerOrOptions ? handlerOrOptions : createRemoveBgHandler(handlerOrOptions);
  const prefix = (options.prefix ?? '').replace(/\/+$/, '');
  const routes = new Map(mountedRoutes(handler).map((route) => [`${prefix}${route.path}`, route]));
  const withSubpaths = mountedRoutes(handler).filter((route) => route.subpaths).map((route) => ({ path: `${prefix}${route.path}/`, route }));

  return async (request, info = {}) => {
    const url = new URL(request.url);
    const route = routes.get(url.pathname) ?? withSubpaths.find((entry) => url.pathname.startsWith(entry.path))?.route;
    if (!route) return notFound();
    // A fetch Request's body is a web stream (or null); the core reads a Node stream.
    const body = request.body ? Readable.fromWeb(request.body as NodeReadableStream<Uint8Array>) : Readable.from([]);
    const response = await route.handle({
      method: request.method,
      url: `${url.pathname}${url.search}`,
      headers: headersOf(request.headers),
      body,
      signal: request.signal,
      clientIp: info.clientIp,
    });
    const answer = toResponse(response);
    // The Response holds its own copy of the bytes (see responseCopiesBody): the core's body,
    // when the adapter alone holds it, goes back now instead of at the next collection.
    if (response.release && (await responseCopiesBody())) response.release();
    return answer;
  };
}

/** Lower-case names as Node gives them; repeated headers arrive joined with ", " as in Node. */
function headersOf(headers: Headers): IncomingHeaders {
  const result: IncomingHeaders = {};
  for (const [name, value] of headers) result[name] = value;
  return result;
}

function toResponse(response: CoreResponse): Response {
  const nullBody = response.status === 204 || response.status === 304;
  return new Response(nullBody ? null : new Uint8Array(response.body.buffer, response.body.byteOffset, response.body.length), {
    status: response.status,
    headers: response.headers,
  });
}

function notFound(): Response {
  const body = JSON.stringify(problemOf(new ApiError('not_found')));
  return new Response(body, { status: 404, headers: { 'content-type': 'application/problem+json', 'cache-control': 'no-store' } });
}
