import { Router, type Request, type RequestHandler, type Response } from 'express';
import { createRemoveBgHandler, type RemoveBgHandler, type RemoveBgOptions } from '../core/index.js';
import type { CoreResponse } from '../core/http-types.js';

export interface ExpressRemoveBgOptions {
  /** Route inside the router. Default `/v1/remove-bg`. */
  path?: string;
}

/**
 * Express middleware answering one remove-bg request through the core handler. Mount it on a
 * route of your choosing: `app.post('/cutout', removeBgMiddleware(handler))`. It reads the raw
 * request stream itself, so keep body parsers that would consume multipart bodies off this route.
 */
export function removeBgMiddleware(handler: RemoveBgHandler): RequestHandler {
  return (req: Request, res: Response, next) => {
    const abort = new AbortController();
    // 'close' on the response before it finished means the client went away.
    res.on('close', () => {
      if (!res.writableFinished) abort.abort();
    });
    handler
      .handle({ method: req.method, url: req.originalUrl, headers: req.headers, body: req, signal: abort.signal })
      .then((response) => writeResponse(res, response))
      .catch(next);
  };
}

/**
 * An Express router serving `POST /v1/remove-bg`, mountable at any prefix of an existing app:
 * `app.use('/api', createRemoveBgRouter(handler))` serves `POST /api/v1/remove-bg`.
 * Pass options instead of a handler to have one created.
 */
export function createRemoveBgRouter(handlerOrOptions: RemoveBgHandler | RemoveBgOptions, options: ExpressRemoveBgOptions = {}): Router {
  const handler = 'handle' in handlerOrOptions ? handlerOrOptions : createRemoveBgHandler(handlerOrOptions);
  const router = Router();
  // Every method reaches the core, which answers 405 with Allow for all but POST.
  router.all(options.path ?? '/v1/remove-bg', removeBgMiddleware(handler));
  return router;
}

function writeResponse(res: Response, response: CoreResponse): void {
  if (res.headersSent || res.destroyed) return;
  res.status(response.status);
  for (const [name, value] of Object.entries(response.headers)) res.setHeader(name, value);
  res.end(response.body);
}
