/**
 * Preloaded into an API process by the `host` bench section (`node --import host-probe.js ...`):
 * measures that process's event-loop delay with perf_hooks.monitorEventLoopDelay (1 ms
 * resolution: the largest delay is the longest time the loop was blocked). On SIGUSR2 it writes
 * the figures since the last signal to $BGCUT_HOST_PROBE_FILE, as JSON in ms, and starts again.
 * Works with any build of the API (it is not part of it), so a `--compare` build is measured alike.
 */
import { writeFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';

const file = process.env.BGCUT_HOST_PROBE_FILE;
if (file) {
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  histogram.enable();
  const ms = (ns: number) => Math.round(ns / 1e4) / 100;
  process.on('SIGUSR2', () => {
    const figures = { maxMs: ms(histogram.max), p99Ms: ms(histogram.percentile(99)), p50Ms: ms(histogram.percentile(50)), meanMs: ms(histogram.mean), samples: histogram.count };
    histogram.reset();
    writeFileSync(file, JSON.stringify(figures));
  });
}
