/**
 * node dist/bench/cpu-profile-summary.js <file.cpuprofile> [--top 25] [--folded out.folded] [--filter substring]
 *
 * A flame graph in text: the functions with the most self time (where the CPU really was), the
 * same by total time (self plus callees), and optionally the folded stacks
 * (`frame;frame;frame count`, the input format of flamegraph.pl / speedscope / inferno) for a
 * picture. Reads the V8 profiles `node --cpu-prof` writes. Native work on other threads (libvips,
 * libuv's pool) is not in a V8 profile: it shows only as the JS that waits for it, so compare the
 * total against the process's CPU time to see how much ran outside JS.
 */
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface ProfileSummary {
  /** Sampled time, in ms (idle excluded). */
  busyMs: number;
  idleMs: number;
  self: { frame: string; ms: number; percent: number }[];
  total: { frame: string; ms: number; percent: number }[];
  folded: string;
}

/** One frame's name: function, file (relative to node_modules or the project) and line. */
function frameName(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  const name = functionName || '(anonymous)';
  if (!url) return name;
  const file = url.replace(/^file:\/\//, '');
  const short = file.includes('node_modules/') ? file.slice(file.lastIndexOf('node_modules/') + 13) : path.basename(file);
  return `${name} ${short}:${lineNumber + 1}`;
}

export function summarize(profile: CpuProfile, top = 25, filter?: string): ProfileSummary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  // Time per node: each sample's delta is the time until the next sample.
  const time = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const dt = (profile.timeDeltas[i + 1] ?? 0) / 1000;
    time.set(profile.samples[i]!, (time.get(profile.samples[i]!) ?? 0) + dt);
  }
  const self = new Map<string, number>();
  const total = new Map<string, number>();
  const folded = new Map<string, number>();
  let busy = 0;
  let idle = 0;
  for (const [id, ms] of time) {
    const node = byId.get(id)!;
    const fn = node.callFrame.functionName;
    if (fn === '(idle)') {
      idle += ms;
      continue;
    }
    const stack: string[] = [];
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const name = frameName(byId.get(at)!);
      if (name !== '(root)') stack.push(name);
    }
    if (filter && !stack.some((f) => f.includes(filter))) continue;
    busy += ms;
    self.set(stack[0]!, (self.get(stack[0]!) ?? 0) + ms);
    for (const f of new Set(stack)) total.set(f, (total.get(f) ?? 0) + ms);
    const key = [...stack].reverse().join(';');
    folded.set(key, (folded.get(key) ?? 0) + ms);
  }
  const rank = (m: Map<string, number>) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([frame, ms]) => ({ frame, ms: Math.round(ms * 10) / 10, percent: Math.round((ms / busy) * 1000) / 10 }));
  return {
    busyMs: Math.round(busy),
    idleMs: Math.round(idle),
    self: rank(self),
    total: rank(total),
    // Counts in microseconds, so short frames keep a width.
    folded: [...folded].map(([stack, ms]) => `${stack} ${Math.round(ms * 1000)}`).join('\n') + '\n',
  };
}

export function printSummary(summary: ProfileSummary, label: string): void {
  console.log(`\n${label}: ${summary.busyMs} ms sampled in JS and the natives it calls on the main thread (idle ${summary.idleMs} ms)`);
  console.log('| self ms | % | function |\n|---|---|---|');
  for (const row of summary.self) console.log(`| ${row.ms} | ${row.percent} | \`${row.frame}\` |`);
  console.log('\n| total ms | % | function (self + callees) |\n|---|---|---|');
  for (const row of summary.total) console.log(`| ${row.ms} | ${row.percent} | \`${row.frame}\` |`);
}

if (process.argv[1] && import.meta.url.endsWith(path.basename(process.argv[1]))) {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { top: { type: 'string', default: '25' }, folded: { type: 'string' }, filter: { type: 'string' } },
  });
  if (positionals.length !== 1) throw new Error('usage: cpu-profile-summary <file.cpuprofile> [--top N] [--folded out.folded] [--filter text]');
  const profile = JSON.parse(await readFile(positionals[0]!, 'utf8')) as CpuProfile;
  const summary = summarize(profile, Number(values.top), values.filter);
  printSummary(summary, path.basename(positionals[0]!));
  if (values.folded) await writeFile(values.folded, summary.folded);
}
