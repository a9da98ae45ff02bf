import { createExpressApp } from '../examples/express-app.js';
import { baseUrlOf, runConformanceSuite } from './conformance/suite.js';

runConformanceSuite({
  name: 'Express',
  async start(handler, prefix) {
    const server = createExpressApp(handler, prefix).listen(0, '127.0.0.1');
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
