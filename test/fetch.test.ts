import { createAdaptorServer } from '@hono/node-server';
import type { Server } from 'node:http';
import { createHonoApp } from '../examples/hono-app.js';
import { baseUrlOf, runConformanceSuite } from './conformance/suite.js';

// The fetch adapter inside a Hono app, served through Node's http server.
runConformanceSuite({
  name: 'fetch (Hono on node:http)',
  async start(handler, prefix) {
    const app = createHonoApp(handler, prefix);
    const server = createAdaptorServer({ fetch: app.fetch }) as Server;
    server.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    return {
      url: baseUrlOf(server),
      close: () =>
        new Promise<void>((resolve) => {
          server.closeAllConnections();
          server.close(() => resolve());
        }),
    };
  },
});
