import type { Server } from 'node:http';
import type { RemoveBgHandler } from '../src/core/index.js';
import { closeAccessLog } from './access-log.js';

/**
 * On SIGTERM or SIGINT: the handler drains first (requests in progress finish; new ones, on any
 * connection, get 503 with Retry-After so clients and load balancers retry elsewhere), then the
 * HTTP server closes gracefully (idle connections at once, busy ones once their answer is
 * written: close() resolves when the last answer is ready, not yet sent), stragglers are cut
 * after 2 s, then `after()` runs (stop child processes) and the process exits 0.
 */
export function shutDownGracefully(server: Server, handler: RemoveBgHandler, after: () => Promise<void> | void = () => {}): void {
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`${signal}: draining requests in progress`);
    await handler.close();
    const force = setTimeout(() => server.closeAllConnections(), 2_000);
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeIdleConnections();
    });
    clearTimeout(force);
    await after();
    await closeAccessLog();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}
