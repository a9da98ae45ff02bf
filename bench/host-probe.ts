/**
 * Preloaded into an API process by the `host` bench section (`node --import host-probe.js ...`):
 * measures that process's event-loop delay with perf_hooks.monitorEventLoopDelay (1 ms
 * resolution: the largest delay is the longest time the loop was blocked). On SIGUSR2 it writes
 * the figures since the last signal to $BGCUT_HOST_PROBE_FILE, as JSON in ms, and starts again.
 * With $BGCUT_HOST_PROFILE_DIR set (the bench's `--host-attribution`), it also runs V8's
 * sampling profiler on the main thread (node:inspector, 0.5 ms) and on each signal writes the
 * profile since the last one to that folder, named in the figures (`profile`), so that each
 * cell's blocks can be attributed to the code that ran in them (bench/block-attribution.ts),
 * and it records the main thread's garbage collections (perf_hooks 'gc' entries: kind, V8's
 * callback flags, the external memory when it ended), whose profile frame says nothing of why.
 * Works with any build of the API (it is not part of it), so a `--compare` build is measured alike.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import path from 'node:path';
import { constants, monitorEventLoopDelay, PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';

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
  const gcs: { ms: number; kind: string; flags: string; externalMb: number }[] = [];
  if (profileDir) {
    const kinds: Record<number, string> = { [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major', [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor', [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental', [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb' };
    const flagNames: [number, string][] = [
      [constants.NODE_PERFORMANCE_GC_FLAGS_FORCED, 'forced'],
      [constants.NODE_PERFORMANCE_GC_FLAGS_ALL_EXTERNAL_MEMORY, 'all-external-memory'],
      [constants.NODE_PERFORMANCE_GC_FLAGS_ALL_AVAILABLE_GARBAGE, 'all-available-garbage'],
      [constants.NODE_PERFORMANCE_GC_FLAGS_SCHEDULE_IDLE, 'schedule-idle'],
      [constants.NODE_PERFORMANCE_GC_FLAGS_SYNCHRONOUS_PHANTOM_PROCESSING, 'synchronous-phantom'],
    ];
    new PerformanceObserver((list) => {
      for (const entry of list.getEntries() as (PerformanceEntry & { detail?: { kind: number; flags: number } })[]) {
        const detail = entry.detail ?? { kind: 0, flags: 0 };
        // V8's memory reducer flags its collections all-external-memory alone; its own collections for
        // external memory pressure carry synchronous-phantom beside it (src/runtime/v8-heap.ts).
        const reducer = detail.kind === constants.NODE_PERFORMANCE_GC_MAJOR && detail.flags === constants.NODE_PERFORMANCE_GC_FLAGS_ALL_EXTERNAL_MEMORY;
        const flags = reducer ? 'memory-reducer' : flagNames.filter(([bit]) => detail.flags & bit).map(([, name]) => name).join('+') || 'none';
        gcs.push({ ms: Math.round(entry.duration * 100) / 100, kind: kinds[detail.kind] ?? String(detail.kind), flags, externalMb: Math.round(process.memoryUsage().external / 1e5) / 10 });
      }
    }).observe({ entryTypes: ['gc'] });
  }
  const report = (profile?: string) => {
    const longestGcs = [...gcs].sort((a, b) => b.ms - a.ms).slice(0, 3);
    const gcTotals = { count: gcs.length, major: gcs.filter((g) => g.kind === 'major').length, ms: Math.round(gcs.reduce((sum, g) => sum + g.ms, 0)) };
    const figures = { maxMs: ms(histogram.max), p99Ms: ms(histogram.percentile(99)), p50Ms: ms(histogram.percentile(50)), meanMs: ms(histogram.mean), samples: histogram.count, ...(profile ? { profile, gc: { ...gcTotals, longest: longestGcs } } : {}) };
    gcs.length = 0;
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
