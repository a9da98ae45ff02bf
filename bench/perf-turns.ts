/**
 * node dist/bench/perf-turns.js <perf.data> [--min-cpu 3] [--from S --to S]
 *
 * The API main thread's event-loop turns by the CPU they really took, from a Linux `perf` recording,
 * to tell the host's own blocks from waits for a core on a busy machine. `--host-attribution`
 * (bench/block-attribution.ts) counts V8's profiler samples, and a sample lands whenever the thread
 * is interrupted, also while it sleeps inside a turn (a garbage collection waiting for its helper
 * threads) or runs in slices between other processes: on a 2-core box at load 10 a turn of 1 ms of
 * work reads as 6-20 ms "ran". `perf`'s cpu-clock event only counts while the thread is on a CPU.
 *
 * Record the API's main thread (its pid is its main thread's id) while `--only host` runs:
 *
 *   perf record -k mono -F 2000 -g -e cpu-clock -e syscalls:sys_enter_epoll_pwait \
 *     -e syscalls:sys_exit_epoll_pwait -t <API pid> -o /tmp/api.perf.data
 *
 * (`--perf-basic-prof` on the API's node names its JavaScript frames; native frames, V8's
 * collector, the message (de)serializer and the kernel's, are named without it.) A turn is the
 * stretch between libuv's return from epoll_pwait and its next call; each is listed with its wall
 * length, its CPU (cpu-clock samples x their period) and what those samples ran, by category.
 */
import { execFileSync } from 'node:child_process';
import { parseArgs } from 'node:util';

interface Sample {
  ms: number;
  event: string;
  stack: string[];
}

/** What a sample ran, by the first frame of its stack that says. */
export function categoryOf(stack: string[]): string {
  const s = stack.join(' | ');
  if (/Scavenger|ScavengeJob|Heap::Scavenge/.test(s)) return 'GC scavenge';
  if (/MarkCompactCollector|Heap::MarkCompact|IncrementalMarking|ConcurrentMarking/.test(s)) return 'GC mark-compact';
  if (/ArrayBufferSweeper|BackingStore::~BackingStore/.test(s)) return 'GC array buffers';
  if (/Heap::CollectGarbage|Heap::PerformGarbageCollection|GCTracer/.test(s)) return 'GC other';
  if (/ValueSerializer|MessagePort::PostMessage|Message::Serialize/.test(s)) return 'postMessage: serialize';
  if (/ValueDeserializer|Message::Deserialize/.test(s)) return 'postMessage: deserialize';
  if (/uv__write|uv_try_write|LibuvStreamWrap::DoTryWrite|LibuvStreamWrap::DoWrite/.test(s)) return 'socket write';
  if (/uv__read|OnUvRead|EmitRead/.test(s)) return 'socket read';
  if (/munmap|madvise/.test(s)) return 'munmap/madvise';
  if (/asm_exc_page_fault/.test(s)) return 'page faults';
  const js = stack.find((f) => /^(LazyCompile|JS|Function):/.test(f) || /\.(js|mjs|cjs):\d+/.test(f));
  return js ? `js: ${js.replace(/^(LazyCompile|JS|Function):\s*/, '').slice(0, 90)}` : `native: ${(stack[0] ?? '?').slice(0, 70)}`;
}

export function readSamples(file: string): Sample[] {
  const text = execFileSync('perf', ['script', '-i', file, '-F', 'tid,time,event,ip,sym'], { maxBuffer: 1 << 30, stdio: ['ignore', 'pipe', 'ignore'] }).toString();
  const samples: Sample[] = [];
  for (const record of text.split('\n\n')) {
    const lines = record.split('\n').filter(Boolean);
    const head = lines[0]?.match(/^\s*\d+\s+([\d.]+):\s+(\S+):/);
    if (!head) continue;
    samples.push({ ms: Number(head[1]) * 1000, event: head[2]!, stack: lines.slice(1).map((l) => l.trim().replace(/^[0-9a-f]+\s+/, '')) });
  }
  return samples;
}

export interface Turn {
  startMs: number;
  wallMs: number;
  cpuMs: number;
  ran: [string, number][];
}

export function turns(samples: Sample[], periodMs: number): Turn[] {
  const out: Turn[] = [];
  let current: { start: number; stacks: string[][] } | undefined;
  const close = (turn: { start: number; stacks: string[][] }, endMs: number) => {
    const ran = new Map<string, number>();
    for (const stack of turn.stacks) ran.set(categoryOf(stack), (ran.get(categoryOf(stack)) ?? 0) + periodMs);
    out.push({ startMs: turn.start, wallMs: endMs - turn.start, cpuMs: turn.stacks.length * periodMs, ran: [...ran].sort((a, b) => b[1] - a[1]) });
  };
  for (const s of samples) {
    // A turn starts at the first return from epoll after the last call into it (a lost event
    // merges two turns rather than dropping one).
    if (/sys_exit_epoll/.test(s.event)) current ??= { start: s.ms, stacks: [] };
    else if (/sys_enter_epoll/.test(s.event)) {
      if (current) close(current, s.ms);
      current = undefined;
    } else if (s.event === 'cpu-clock' && current) {
      // A sample inside epoll_pwait is the thread in its wait: the turn ended there even when
      // perf lost the call's event (it does under load), so two turns are not read as one.
      if (s.stack.some((frame) => /^epoll_pwait\b|^__GI_epoll_pwait|^epoll_wait\b/.test(frame))) {
        close(current, s.ms);
        current = undefined;
      } else current.stacks.push(s.stack);
    }
  }
  return out;
}

if (process.argv[1]?.endsWith('perf-turns.js')) {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { 'min-cpu': { type: 'string', default: '3' }, from: { type: 'string' }, to: { type: 'string' }, hz: { type: 'string', default: '2000' } } });
  if (!positionals[0]) throw new Error('usage: perf-turns <perf.data> [--min-cpu MS] [--from S --to S] [--hz 2000]');
  const from = values.from ? Number(values.from) * 1000 : -Infinity;
  const to = values.to ? Number(values.to) * 1000 : Infinity;
  const all = turns(readSamples(positionals[0]).filter((s) => s.ms >= from && s.ms <= to), 1000 / Number(values.hz));
  const cpu = all.reduce((sum, t) => sum + t.cpuMs, 0);
  const longestWall = [...all].sort((a, b) => b.wallMs - a.wallMs)[0];
  console.log(`${all.length} turns, ${cpu.toFixed(0)} ms CPU in them; longest by wall ${longestWall?.wallMs.toFixed(1)} ms (${longestWall?.cpuMs} ms CPU)`);
  console.log('| at s | wall ms | CPU ms | what the CPU ran (ms) |\n|---|---|---|---|');
  for (const t of all.filter((t) => t.cpuMs >= Number(values['min-cpu']))) {
    console.log(`| ${(t.startMs / 1000).toFixed(3)} | ${t.wallMs.toFixed(1)} | ${t.cpuMs.toFixed(1)} | ${t.ran.slice(0, 5).map(([what, ms]) => `${what} ${ms}`).join('; ')} |`);
  }
}
