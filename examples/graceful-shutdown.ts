import type { Server } from 'node:http';
import type { RemoveBgHandler } from '../src/core/index.js';

/**
 * On SIGTERM or SIGINT: the handler drains first (requests in progress finish; new ones, on any
 * connection, get 503 with Retry-After so clients and load balancers retry elsewhere), then the
 * HTTP server closes its connections, then `after()` runs (stop child processes) and the
 * process exits 0.
 */
export function shutDownGracefully(server: Server, handler: RemoveBgHandler, after: () => Promise<void> | void = () => {}): void {
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`${signal}: draining requests in progress`);
    await handler.close();
    server.close();
    server.closeAllConnections();
    await after();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}
