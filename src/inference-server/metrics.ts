import http from 'node:http';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Prometheus metrics of one inference server. */
export class InferenceMetrics {
  readonly registry = new Registry();
  readonly queueDepth = new Gauge({ name: 'bgcut_inference_queue_depth', help: 'Calls waiting for a free worker', labelNames: ['model'], registers: [this.registry] });
  readonly running = new Gauge({ name: 'bgcut_inference_running', help: 'Calls inside session.run', labelNames: ['model'], registers: [this.registry] });
  readonly calls = new Counter({
    name: 'bgcut_inference_calls_total',
    help: 'ModelInfer calls by model, execution provider and gRPC status',
    labelNames: ['model', 'provider', 'status'],
    registers: [this.registry],
  });
  readonly started = new Counter({
    name: 'bgcut_inference_started_total',
    help: 'Inferences handed to a worker (warm-up included): a call dropped while it was queued never counts',
    labelNames: ['model'],
    registers: [this.registry],
  });
  readonly runSeconds = new Histogram({
    name: 'bgcut_inference_run_seconds',
    help: 'Time inside session.run',
    labelNames: ['model', 'provider'],
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 1.5, 2, 3, 5, 8, 13],
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: 'bgcut_inference_' });
  }

  /** Serves GET /metrics on its own port (Prometheus scrapes HTTP, the server speaks gRPC). */
  listen(port: number, host: string): Promise<http.Server> {
    const server = http.createServer((req, res) => {
      if (req.method !== 'GET' || req.url !== '/metrics') {
        res.writeHead(404).end();
        return;
      }
      this.registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': this.registry.contentType }).end(text),
        () => res.writeHead(500).end(),
      );
    });
    return new Promise((resolve, reject) => server.listen(port, host, () => resolve(server)).on('error', reject));
  }
}
