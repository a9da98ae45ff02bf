/**
 * node dist/bench/block-attribution.js <file.cpuprofile> [--top 8] [--min-ms 5]
 *
 * What blocked the event loop, by attribution rather than wall time: a V8 CPU profile of the
 * main thread (`node --cpu-prof`) samples about every millisecond, `(idle)` when the loop waits
 * in epoll. A run of consecutive non-idle samples is one stretch the loop did not get back:
 * a block. For the longest blocks this lists their length, how many samples they hold (on a
 * loaded machine a sample's delta includes time the process waited for a core, so samples x
 * interval against the wall length tells how much of a block was the machine), the functions
 * with the most self time in it (samples x interval), and its heaviest stack. Blocks are ranked
 * by the time they ran. `(garbage collector)` and `(program)`
 * (native work outside JS on the main thread) count as busy: the loop is held either way.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface Block {
  /** From the profile's start, in ms. */
  startMs: number;
  /** Wall length, in ms: from the block's first sample to the first idle sample after it. */
  ms: number;
  samples: number;
  /** The sampled time the process really ran: samples x the profile's median sample interval. */
  sampledMs: number;
  self: { frame: string; ms: number }[];
  /** The heaviest stack in the block, outermost first (project and library frames only). */
  stack: string[];
}

function frameName(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  const name = functionName || '(anonymous)';
  if (!url) return name;
  const file = url.replace(/^file:\/\//, '');
  const short = file.includes('node_modules/') ? file.slice(file.lastIndexOf('node_modules/') + 13) : path.basename(file);
  return `${name} ${short}:${lineNumber + 1}`;
}

/** The longest blocks of the profile's main thread, longest first. */
export function longestBlocks(profile: CpuProfile, top = 8, minMs = 2): Block[] {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const idle = (id: number) => byId.get(id)!.callFrame.functionName === '(idle)';
  // Sample i was taken at times[i]; its time runs until sample i + 1.
  const times: number[] = [];
  let t = profile.startTime;
  for (const d of profile.timeDeltas) times.push((t += d));
  const deltas = profile.timeDeltas.slice(1).sort((a, b) => a - b);
  const interval = (deltas[Math.floor(deltas.length / 2)] ?? 1000) / 1000;
  const stretches: { from: number; to: number }[] = [];
  for (let i = 0; i < profile.samples.length; ) {
    if (idle(profile.samples[i]!)) {
      i++;
      continue;
    }
    let j = i;
    while (j < profile.samples.length && !idle(profile.samples[j]!)) j++;
    stretches.push({ from: i, to: j });
    i = j;
  }
  const wall = (s: { from: number; to: number }) => ((times[s.to] ?? profile.endTime) - times[s.from]!) / 1000;
  // Longest by the time the thread ran in them (on a quiet machine the same as wall time).
  return stretches
    .map((s) => ({ s, ms: wall(s), ran: (s.to - s.from) * interval }))
    .filter((b) => b.ran >= minMs)
    .sort((a, b) => b.ran - a.ran)
    .slice(0, top)
    .map(({ s, ms }) => {
      const self = new Map<string, number>();
      const stacks = new Map<number, number>();
      for (let i = s.from; i < s.to; i++) {
        const id = profile.samples[i]!;
        // A sample counts its interval, not its delta: a delta also holds the time the
        // process waited for a core, which is the machine's, not this code's.
        const dt = interval;
        const name = frameName(byId.get(id)!);
        self.set(name, (self.get(name) ?? 0) + dt);
        stacks.set(id, (stacks.get(id) ?? 0) + dt);
      }
      const heaviest = [...stacks].sort((a, b) => b[1] - a[1])[0]![0];
      const stack: string[] = [];
      for (let at: number | undefined = heaviest; at !== undefined; at = parent.get(at)) {
        const name = frameName(byId.get(at)!);
        if (name !== '(root)') stack.unshift(name);
      }
      return {
        startMs: Math.round((times[s.from]! - profile.startTime) / 1000),
        ms: Math.round(ms * 10) / 10,
        samples: s.to - s.from,
        sampledMs: Math.round((s.to - s.from) * interval * 10) / 10,
        self: [...self]
          .sort((a, b) => b[1] - a[1])
          .slice(0, 4)
          .map(([frame, v]) => ({ frame, ms: Math.round(v * 10) / 10 })),
        stack: stack.slice(-8),
      };
    });
}

export function printBlocks(blocks: Block[], label: string): void {
  console.log(`\n${label}: the longest stretches the main thread did not return to the event loop (CPU profile; wall ms, and samples x interval = time it ran)`);
  console.log('| at ms | wall ms | ran ms (samples) | most self time | heaviest stack (innermost last) |\n|---|---|---|---|---|');
  for (const b of blocks) {
    const self = b.self.map((f) => `\`${f.frame}\` ${f.ms}`).join('; ');
    console.log(`| ${b.startMs} | **${b.ms}** | ${b.sampledMs} (${b.samples}) | ${self} | ${b.stack.map((f) => `\`${f}\``).join(' > ')} |`);
  }
}

if (process.argv[1] && import.meta.url.endsWith(path.basename(process.argv[1]))) {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: 'string', default: '8' }, 'min-ms': { type: 'string', default: '2' } } });
  if (positionals.length === 0) throw new Error('usage: block-attribution <file.cpuprofile>... [--top N] [--min-ms M]');
  for (const file of positionals) {
    const profile = JSON.parse(await readFile(file, 'utf8')) as CpuProfile;
    printBlocks(longestBlocks(profile, Number(values.top), Number(values['min-ms'])), path.basename(file));
  }
}
