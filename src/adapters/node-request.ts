import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CoreRequest } from '../core/http-types.js';

/**
 * The core's view of a request on Node's HTTP server, shared by the Express and Fastify
 * adapters. Its signal aborts the moment the client goes away (the response closes before it
 * finished), so every wait in the core stops and gives back what it held.
 */
export function coreRequestOf(req: IncomingMessage, res: ServerResponse, view: { url: string; clientIp: string | undefined; protocol?: string }): CoreRequest {
  const abort = new AbortController();
  const onClose = () => {
    if (!res.writableFinished) abort.abort();
  };
  if (res.closed || req.destroyed) onClose();
  else res.once('close', onClose);
  return {
    method: req.method ?? 'GET',
    url: view.url,
    headers: req.headers,
    body: req,
    signal: abort.signal,
    clientIp: view.clientIp,
    protocol: view.protocol === 'https' ? 'https' : 'http',
  };
}
