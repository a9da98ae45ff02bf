import { Router, type Request, type RequestHandler, type Response } from 'express';
import { createRemoveBgHandler, type RemoveBgHandler, type RemoveBgOptions } from '../core/index.js';
import type { CoreRequest, CoreResponse } from '../core/http-types.js';
import { coreRequestOf } from './node-request.js';
import { Readable } from 'node:stream';
import { checkExpressTrustProxy } from './trust-proxy.js';
import { mountedRoutes } from '../openapi/routes.js';
import { writesWrapped } from './writes-wrapped.js';

/**
 * Express middleware answering one route through the core. It reads the raw request stream
 * itself, so keep body parsers that would consume multipart bodies off its path.
 * `app.post('/cutout', routeMiddleware(handler.handle))`.
 */
export function routeMiddleware(handle: (request: CoreRequest) => Promise<CoreResponse>): RequestHandler {
  return (req: Request, res: Response, next) => {
    checkExpressTrustProxy(req.app);
    // req.ip honours the app's 'trust proxy' setting.
    const request = coreRequestOf(req, res, { url: req.originalUrl, clientIp: req.ip, protocol: req.protocol });
    // The host app's express.json() or express.urlencoded() may have read a JSON or form body
    // (`{"image_url": ...}`, remove.bg's `image_file_b64=...`) already: the core gets it back as
    // JSON and reads it with its own limits. (A parser's own limit, 100 kB by default, refuses a
    // larger body before bgcut sees it: mount bgcut's router ahead of body parsers.)
    if (req.readableEnded && isPlainObject(req.body)) {
      const json = Buffer.from(JSON.stringify(req.body));
      request.body = Readable.from([json]);
      request.headers = { ...request.headers, 'content-type': 'application/json', 'content-length': String(json.length) };
    }
    handle(request)
      .then((response) => writeResponse(res, response))
      .catch(next);
  };
}

/**
 * An Express router serving `POST /v1/remove-bg` and `GET /v1/account`, mountable at any
 * prefix of an existing app: `app.use('/api', createRemoveBgRouter(handler))`.
 * Pass options instead of a handler to have one created.
 */
export function createRemoveBgRouter(handlerOrOptions: RemoveBgHandler | RemoveBgOptions): Router {
  const handler = 'handle' in handlerOrOptions ? handlerOrOptions : createRemoveBgHandler(handlerOrOptions);
  const router = Router();
  // Every method reaches the core, which answers 405 with Allow for the wrong ones.
  for (const route of mountedRoutes(handler)) {
    router.all(route.path, routeMiddleware(route.handle));
    // A RegExp, read alike by Express 4 and 5 (their wildcard syntaxes differ).
    if (route.subpaths) router.all(new RegExp(`^${route.path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/.+`), routeMiddleware(route.handle));
  }
  return router;
}

function writeResponse(res: Response, response: CoreResponse): void {
  if (res.headersSent || res.destroyed) return;
  res.status(response.status);
  for (const [name, value] of Object.entries(response.headers)) res.setHeader(name, value);
  // The body's memory goes back once it was written out, unless a middleware of the host wrapped
  // the response's writes (compression, a cache) and may hold it longer.
  if (response.release && !writesWrapped(res)) res.once('finish', response.release);
  res.end(response.body);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null) return false;
  // express.urlencoded({ extended: false }) gives an object without a prototype.
  const prototype = Object.getPrototypeOf(value) as unknown;
  return prototype === Object.prototype || prototype === null;
}

