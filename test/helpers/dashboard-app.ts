import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ActivityRecorder, createRemoveBgHandler, FileKeyStore, type Plans, type RemoveBgHandler } from '../../src/core/index.js';
import { createDashboard, FileDashboardStore, PasswordHasher, setAccountHolder, type Dashboard, type DashboardOptions } from '../../src/dashboard/index.js';
import { createExpressApp } from '../../examples/express-app.js';
import { createFastifyApp } from '../../examples/fastify-app.js';
import { captureInternalError } from './log-capture.js';

export const HOLDER = { email: 'ada@example.com', password: 'correct horse battery', accountId: 'acct_ada' };
export const OTHER = { email: 'bob@example.com', password: 'another long password', accountId: 'acct_bob' };
export const DASHBOARD_PLANS: Plans = { roomy: { requestsPerMinute: 1000, monthlyQuota: { unit: 'images', amount: 500 } } };
const SECRET = 'test-secret-that-is-at-least-32-bytes-long';
/**
 * scrypt at N = 2^10 (about 1 ms, not 1 s on this box), so the suites stay fast. The default
 * cost is checked by its own tests (dashboard-security.test.ts), which also sign in through a
 * dashboard left at the default.
 */
export const FAST_HASHER = new PasswordHasher({ N: 2 ** 10, r: 8, p: 1 });

export interface DashboardApp {
  url: string;
  handler: RemoveBgHandler;
  keyStore: FileKeyStore;
  store: FileDashboardStore;
  activity: ActivityRecorder;
  dashboard: Dashboard;
  /** Every request the server answered, as `status METHOD url`, in order of completion. */
  served: string[];
  close(): Promise<void>;
}

/**
 * The example Express app (or a Fastify one) with the endpoint and the dashboard on a fresh key
 * file, with two account holders; listens on 127.0.0.1 on a free port.
 */
export async function startDashboardApp(
  options: { inferenceAddress?: string; framework?: 'express' | 'fastify'; dashboard?: Partial<DashboardOptions>; plans?: Plans } = {},
): Promise<DashboardApp> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-dashboard-'));
  const keyStore = new FileKeyStore({ file: path.join(dir, 'keys.json'), reloadIntervalMs: 0 });
  const store = new FileDashboardStore(keyStore);
  const activity = new ActivityRecorder({ store, flushIntervalMs: 60_000 });
  // An account exists once it has a key; revoke the set-up key so the list starts empty.
  for (const who of [HOLDER, OTHER]) {
    const { record } = await keyStore.createKey({ accountId: who.accountId, plan: 'roomy' });
    await keyStore.update((data) => {
      data.keys = data.keys.filter((k) => k.id !== record.id);
    });
    await setAccountHolder(store, who.accountId, who.email, who.password, FAST_HASHER);
  }
  const handler = createRemoveBgHandler({
    keyStore,
    activity,
    usageStore: store.usage,
    plans: { ...DASHBOARD_PLANS, ...options.plans },
    inference: { address: options.inferenceAddress ?? '127.0.0.1:1', timeoutMs: 30_000, startupTimeoutMs: 1000 },
    onInternalError: captureInternalError,
  });
  const dashboard = createDashboard({ handler, keyStore, store, activity, secret: SECRET, passwordHasher: FAST_HASHER, onInternalError: (e) => console.error(e), ...options.dashboard });
  let url: string;
  let stop: () => Promise<void>;
  const served: string[] = [];
  const watch = (server: Server) =>
    server.on('request', (req: IncomingMessage, res: ServerResponse) => res.on('finish', () => served.push(`${res.statusCode} ${req.method} ${req.url}`)));
  if (options.framework === 'fastify') {
    const app = await createFastifyApp(handler, '', dashboard);
    url = await app.listen({ port: 0, host: '127.0.0.1' });
    watch(app.server);
    stop = () => app.close();
  } else {
    const server: Server = createExpressApp(handler, '', dashboard).listen(0, '127.0.0.1');
    watch(server);
    await new Promise((resolve) => server.once('listening', resolve));
    const address = server.address();
    url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
    stop = () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      });
  }
  return {
    url,
    handler,
    keyStore,
    store,
    activity,
    dashboard,
    served,
    async close() {
      await stop();
      await activity.close();
      await handler.close();
      await store.close();
    },
  };
}
