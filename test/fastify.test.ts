import { createFastifyApp } from '../examples/fastify-app.js';
import { baseUrlOf, runConformanceSuite } from './conformance/suite.js';

runConformanceSuite({
  name: 'Fastify',
  async start(handler, prefix) {
    const app = await createFastifyApp(handler, prefix);
    await app.listen({ port: 0, host: '127.0.0.1' });
    return { url: baseUrlOf(app.server), close: () => app.close() };
  },
});
