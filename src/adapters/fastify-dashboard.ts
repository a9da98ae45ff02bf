import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { Dashboard } from '../dashboard/index.js';
import { coreRequestOf } from './node-request.js';
import { checkFastifyTrustProxy } from './trust-proxy.js';

export interface FastifyDashboardOptions {
  dashboard: Dashboard;
}

/**
 * Encapsulated Fastify plugin serving the dashboard at its basePath:
 * `await app.register(dashboardPlugin, { dashboard })` (no `prefix`: the dashboard knows its own).
 * Inside its context the body parsers leave the request stream unread for the core.
 */
export const dashboardPlugin: FastifyPluginAsync<FastifyDashboardOptions> = async (fastify, { dashboard }) => {
  checkFastifyTrustProxy(fastify);
  fastify.removeAllContentTypeParsers();
  fastify.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined));
  const serve = async (request: FastifyRequest, reply: FastifyReply) => {
    const response = await dashboard.handle(coreRequestOf(request.raw, reply.raw, { url: request.raw.url ?? request.url, clientIp: request.ip, protocol: request.protocol }));
    return reply.code(response.status).headers(response.headers).send(response.body);
  };
  fastify.all(dashboard.basePath, serve);
  fastify.all(`${dashboard.basePath}/*`, serve);
};
