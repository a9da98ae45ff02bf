import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** Prometheus metrics of one API instance (its own registry, so several handlers never clash). */
export class ApiMetrics {
  readonly registry = new Registry();
  readonly requests = new Counter({
    name: 'bgcut_http_requests_total',
    help: 'Responses by route, status and problem code',
    labelNames: ['route', 'status', 'code'],
    registers: [this.registry],
  });
  readonly duration = new Histogram({
    name: 'bgcut_http_request_duration_seconds',
    help: 'Time from request to response',
    labelNames: ['route'],
    buckets: [0.005, 0.05, 0.25, 0.5, 1, 2, 3, 5, 8, 13, 21, 34],
    registers: [this.registry],
  });
  readonly stages = new Histogram({
    name: 'bgcut_stage_duration_seconds',
    help: 'Time per pipeline stage of successful cutouts',
    labelNames: ['stage'],
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8],
    registers: [this.registry],
  });
  readonly bytesIn = new Counter({ name: 'bgcut_upload_bytes_total', help: 'Bytes of uploaded images', registers: [this.registry] });
  readonly bytesOut = new Counter({ name: 'bgcut_response_bytes_total', help: 'Bytes of response bodies', registers: [this.registry] });
  readonly inFlight = new Gauge({ name: 'bgcut_requests_in_flight', help: 'Requests uploading or being processed', registers: [this.registry] });

  /** `budgets` reads the memory budgets at each scrape: what is held now, and how many wait. */
  constructor(budgets: () => { inferenceSlots: number; inferenceQueue: number; pixels: number; rendersInBands?: number; rendersWhole?: number; pngsInBands?: number; pngsWhole?: number }) {
    collectDefaultMetrics({ register: this.registry, prefix: 'bgcut_api_' });
    const gauge = (name: string, help: string, read: () => number) =>
      new Gauge({
        name,
        help,
        registers: [this.registry],
        collect() {
          this.set(read());
        },
      });
    gauge('bgcut_inference_slots_in_use', 'Inference calls this instance makes now', () => budgets().inferenceSlots);
    gauge('bgcut_inference_slots_waiting', 'Requests waiting for an inference slot', () => budgets().inferenceQueue);
    gauge('bgcut_pixels_in_process', 'Full-size pixels being decoded, composed and encoded', () => budgets().pixels);
    // How often a lone render was split across idle pixel workers (image/render-bands.ts), read from the pool at each scrape.
    new Counter({
      name: 'bgcut_renders_total',
      help: 'Renders by the pixel workers: split in row bands across idle workers (`bands`) or made by one (`one`)',
      labelNames: ['split'],
      registers: [this.registry],
      collect() {
        const now = budgets();
        this.reset();
        this.inc({ split: 'bands' }, now.rendersInBands ?? 0);
        this.inc({ split: 'one' }, now.rendersWhole ?? 0);
      },
    });
    // How often the fast encoder's PNG was made in row bands on libuv's threads (image/png-bands.ts).
    new Counter({
      name: 'bgcut_png_encodes_total',
      help: 'RGBA PNGs by the fast encoder: in row bands at once while cores were idle (`bands`) or whole (`whole`)',
      labelNames: ['split'],
      registers: [this.registry],
      collect() {
        const now = budgets();
        this.reset();
        this.inc({ split: 'bands' }, now.pngsInBands ?? 0);
        this.inc({ split: 'whole' }, now.pngsWhole ?? 0);
      },
    });
  }
}
