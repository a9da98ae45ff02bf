import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { createRemoveBgHandler, type RemoveBgHandler, type RemoveBgOptions } from '../core/index.js';
import { coreRequestOf } from './node-request.js';
import { checkFastifyTrustProxy } from './trust-proxy.js';
import { mountedRoutes } from '../openapi/routes.js';

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
      return reply.code(response.status).headers(response.headers).send(response.body);
    };
    fastify.all(route.path, answer);
    if (route.subpaths) fastify.all(`${route.path}/*`, answer);
  }
};
