/**
 * Several API processes behind one port on one host (Node's cluster module: the primary holds
 * the listening socket and hands connections to the workers in turn). Each worker is the Express
 * example; REDIS_URL makes them share API keys, rate limits, quotas and concurrency caps (without
 * it each process would keep limits of its own, so several processes need it).
 *
 * Run: REDIS_URL=redis://127.0.0.1:6379 BGCUT_API_PROCESSES=2 node dist/src/runtime/launch.js dist/examples/cluster.js
 * (through bgcut-launch, every worker runs on the launcher's malloc as well, glibc tuned by
 * default or jemalloc with BGCUT_MALLOC=jemalloc, and with its V8 heap flag: the workers inherit
 * the environment and the primary's node flags).
 * Each worker's `inference.maxConcurrentInferences` slots are its own: N workers together may
 * keep N times as many inferences in flight at the inference server.
 */
import cluster from 'node:cluster';
import { createExpressApp, handlerFromEnvironment } from './express-app.js';
import { shutDownGracefully } from './graceful-shutdown.js';

const processes = Number(process.env.BGCUT_API_PROCESSES ?? 2);
if (!Number.isInteger(processes) || processes < 1) throw new RangeError('BGCUT_API_PROCESSES must be a whole number, at least 1');

if (cluster.isPrimary) {
  if (processes > 1 && !process.env.REDIS_URL) {
    console.warn(`cluster: ${processes} API processes without REDIS_URL: each keeps its own rate limits and quotas`);
  }
  let stopping = false;
  for (let i = 0; i < processes; i++) cluster.fork();
  cluster.on('exit', (worker, code, signal) => {
    if (stopping) return;
    console.error(`cluster: API process ${worker.process.pid} exited (${signal ?? code}); starting another`);
    cluster.fork();
  });
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.on(signal, () => {
      stopping = true;
      for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGTERM');
      const done = () => Object.keys(cluster.workers ?? {}).length === 0 && process.exit(0);
      cluster.on('exit', done);
      done();
    });
  }
} else {
  const handler = handlerFromEnvironment();
  await handler.ready();
  const port = Number(process.env.PORT ?? 3000);
  const server = createExpressApp(handler).listen(port, () => console.log(`API process ${process.pid} listening on http://localhost:${port}`));
  shutDownGracefully(server, handler);
}
