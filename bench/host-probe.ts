/**
 * Preloaded into an API process by the `host` bench section (`node --import host-probe.js ...`):
 * measures that process's event-loop delay with perf_hooks.monitorEventLoopDelay (1 ms
 * resolution: the largest delay is the longest time the loop was blocked). On SIGUSR2 it writes
 * the figures since the last signal to $BGCUT_HOST_PROBE_FILE, as JSON in ms, and starts again.
 * With $BGCUT_HOST_PROFILE_DIR set (the bench's `--host-attribution`), it also runs V8's
 * sampling profiler on the main thread (node:inspector, 0.5 ms) and on each signal writes the
 * profile since the last one to that folder, named in the figures (`profile`), so that each
 * cell's blocks can be attributed to the code that ran in them (bench/block-attribution.ts).
 * Works with any build of the API (it is not part of it), so a `--compare` build is measured alike.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';

const file = process.env.BGCUT_HOST_PROBE_FILE;
const profileDir = process.env.BGCUT_HOST_PROFILE_DIR;
if (file) {
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  histogram.enable();
  const ms = (ns: number) => Math.round(ns / 1e4) / 100;
  let session: Session | undefined;
  if (profileDir) {
    session = new Session();
    session.connect();
    session.post('Profiler.enable');
    session.post('Profiler.setSamplingInterval', { interval: 500 });
    session.post('Profiler.start');
  }
  let cells = 0;
  const report = (profile?: string) => {
    const figures = { maxMs: ms(histogram.max), p99Ms: ms(histogram.percentile(99)), p50Ms: ms(histogram.percentile(50)), meanMs: ms(histogram.mean), samples: histogram.count, ...(profile ? { profile } : {}) };
    // Reset after the profile was written: writing it is the probe's block, not the API's.
    histogram.reset();
    writeFileSync(file, JSON.stringify(figures));
  };
  process.on('SIGUSR2', () => {
    if (!session) return report();
    session.post('Profiler.stop', (error, result) => {
      const out = path.join(profileDir!, `${process.pid}-${++cells}.cpuprofile`);
      if (!error) writeFileSync(out, JSON.stringify(result.profile));
      session!.post('Profiler.start');
      report(error ? undefined : out);
    });
  });
}
