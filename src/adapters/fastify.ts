import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { createRemoveBgHandler, type RemoveBgHandler, type RemoveBgOptions } from '../core/index.js';
import { coreRequestOf } from './node-request.js';
import { checkFastifyTrustProxy } from './trust-proxy.js';
import { mountedRoutes } from '../openapi/routes.js';
import { writesWrapped } from './writes-wrapped.js';

export interface FastifyRemoveBgOptions {
  /** A handler from createRemoveBgHandler, or options to create one. */
  handler: RemoveBgHandler | RemoveBgOptions;
}

/**
 * Encapsulated Fastify plugin serving `POST /v1/remove-bg` and `GET /v1/account`:
 * `await app.register(removeBgPlugin, { handler, prefix: '/api' })`.
 *
 * Inside its own encapsulation context it replaces the body parsers with one that leaves the
 * request stream unread, so the core reads multipart itself (after checking the key) and the
 * host app's own parsers and routes are untouched.
 */
export const removeBgPlugin: FastifyPluginAsync<FastifyRemoveBgOptions> = async (fastify, options) => {
  const handler = 'handle' in options.handler ? options.handler : createRemoveBgHandler(options.handler);
  checkFastifyTrustProxy(fastify);
  fastify.removeAllContentTypeParsers();
  fastify.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined));

  for (const route of mountedRoutes(handler)) {
    const answer = async (request: FastifyRequest, reply: FastifyReply) => {
      // request.ip honours the app's trustProxy setting.
      const response = await route.handle(coreRequestOf(request.raw, reply.raw, { url: request.raw.url ?? request.url, clientIp: request.ip, protocol: request.protocol }));
      // The body's memory goes back once it was written out (as the Express adapter does), unless
      // something of the host's may hold it longer: an onSend hook (compression, a cache) or a
      // wrapped write of the raw response.
      if (response.release && !hasOnSendHooks(request) && !writesWrapped(reply.raw)) reply.raw.once('finish', response.release);
      return reply.code(response.status).headers(response.headers).send(response.body);
    };
    fastify.all(route.path, answer);
    if (route.subpaths) fastify.all(`${route.path}/*`, answer);
  }
};

/**
 * Whether the route runs any onSend hook (the host's or a plugin's: @fastify/compress, a response
 * cache), which may keep the payload past the response. Fastify has no public way to ask, so this
 * reads the route's context (its own `fastify.context` symbol, whose `onSend` is null when no hook
 * applies); when that cannot be read (another Fastify), it answers yes, and the body is left to the
 * collector as before.
 */
function hasOnSendHooks(request: FastifyRequest): boolean {
  const key = Object.getOwnPropertySymbols(request).find((symbol) => symbol.description === 'fastify.context');
  const context = key && (request as unknown as Record<symbol, unknown>)[key];
  if (typeof context !== 'object' || context === null || !('onSend' in context)) return true;
  return (context as { onSend: unknown }).onSend !== null;
}
