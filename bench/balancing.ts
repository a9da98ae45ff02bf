/**
 * Balancing across inference servers: p50/p99 of ModelInfer calls through one InferenceClient
 * for round-robin, least outstanding requests (calls open alone) and least-request (calls open x
 * recent call time, the default), first with three equally fast servers, then with one of them
 * five times slower.
 *
 *   npm run bench -- --only balancing        (or: node dist/bench/balancing.js [--calls 900] [--rate 60])
 *
 * What makes it honest on a small shared machine: the servers run a tiny identity model (64x64x3
 * bytes in and out) and are slowed by `--test-run-delay-ms`, which holds each worker that long
 * after session.run, as a slower machine would. So a server's service time is the delay, not
 * CPU that three servers and the client would fight over on two cores; what is measured is where
 * the policy sends calls and how long they wait there. Calls arrive open-loop (Poisson, fixed
 * seed) at `--rate` per second, half the capacity of three fast servers (1 worker each, 25 ms a
 * call: 120/s); the first `--calls / 6` of each run warm up the policy and are not measured.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { InferenceClient, type Balancing } from '../src/core/inference/inference-client.js';
import { writeIdentityModel } from '../test/helpers/identity-model.js';
import { startInferenceProcess, type InferenceProcess } from '../test/helpers/inference-process.js';

export const FAST_MS = 25;
export const SLOW_MS = 5 * FAST_MS;
const POLICIES: Balancing[] = ['round-robin', 'least-outstanding', 'least-request'];
const SIDE = 64;

export interface BalancingRow {
  servers: 'all fast' | 'one slowed';
  policy: Balancing;
  p50Ms: number;
  p99Ms: number;
  /** Share of the measured calls each server answered (from its Prometheus counter), fast ones first. */
  shares: number[];
  failed: number;
}

function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  const rank = (p / 100) * (s.length - 1);
  const lo = Math.floor(rank);
  return s[lo]! + (s[Math.min(s.length - 1, lo + 1)]! - s[lo]!) * (rank - lo);
}

async function okCalls(server: InferenceProcess): Promise<number> {
  const text = await (await fetch(server.metricsUrl!)).text();
  const line = text.split('\n').find((l) => l.startsWith('bgcut_inference_calls_total') && l.includes('status="OK"'));
  return line ? Number(line.split(' ').pop()) : 0;
}

/** Seeded exponential gaps, so every run sees the same arrival pattern. */
function arrivals(count: number, ratePerS: number): number[] {
  let seed = 42;
  const random = () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return (seed + 1) / 0x80000000;
  };
  const gaps: number[] = [];
  for (let i = 0; i < count; i++) gaps.push((-Math.log(random()) / ratePerS) * 1000);
  return gaps;
}

async function measure(servers: InferenceProcess[], policy: Balancing, calls: number, ratePerS: number) {
  const client = new InferenceClient({ address: servers.map((s) => s.address), balancing: policy, timeoutMs: 60_000, maxMessageBytes: 1 << 20, retryAfterSeconds: 1 });
  const input = { name: 'x', datatype: 'UINT8' as const, shape: [1, SIDE, SIDE, 3], data: new Uint8Array(SIDE * SIDE * 3) };
  const output = { name: 'y', datatype: 'UINT8' as const };
  const warm = Math.floor(calls / 6);
  const gaps = arrivals(warm + calls, ratePerS);
  const latencies: number[] = [];
  let failed = 0;
  let before: number[] = [];
  const pending: Promise<void>[] = [];
  for (let i = 0; i < gaps.length; i++) {
    if (i === warm) {
      await Promise.all(pending.splice(0));
      before = await Promise.all(servers.map(okCalls));
    }
    await new Promise((r) => setTimeout(r, gaps[i]));
    const started = performance.now();
    const measured = i >= warm;
    pending.push(
      client.infer('tiny', input, output, new AbortController().signal).then(
        () => void (measured && latencies.push(performance.now() - started)),
        () => void (measured && failed++),
      ),
    );
  }
  await Promise.all(pending);
  const after = await Promise.all(servers.map(okCalls));
  client.close();
  const served = after.map((n, i) => n - before[i]!);
  const total = served.reduce((a, b) => a + b, 0);
  return {
    p50Ms: Math.round(percentile(latencies, 50) * 10) / 10,
    p99Ms: Math.round(percentile(latencies, 99) * 10) / 10,
    shares: served.map((n) => Math.round((n / total) * 1000) / 1000),
    failed,
  };
}

export async function balancingBench(options: { calls?: number; ratePerS?: number } = {}): Promise<{ rows: BalancingRow[]; p99OverAllFast: number; settings: object }> {
  const calls = options.calls ?? 900;
  const ratePerS = options.ratePerS ?? 60;
  const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-balancing-'));
  const model = await writeIdentityModel(dir, SIDE);
  const serverArgs = (delay: number) => ['--model', `tiny=${model}`, '--workers', '1', '--threads', '1', '--queue', '1000', '--metrics-port', '0', '--test-run-delay-ms', String(delay)];
  const servers = await Promise.all([FAST_MS, FAST_MS, FAST_MS, SLOW_MS].map((delay) => startInferenceProcess(serverArgs(delay))));
  const rows: BalancingRow[] = [];
  try {
    for (const [label, tier] of [['all fast', servers.slice(0, 3)], ['one slowed', [servers[0]!, servers[1]!, servers[3]!]]] as ['all fast' | 'one slowed', InferenceProcess[]][]) {
      for (const policy of POLICIES) {
        const row = { servers: label, policy, ...(await measure(tier, policy, calls, ratePerS)) };
        rows.push(row);
        console.log(`  ${label}, ${policy}: p50 ${row.p50Ms} ms, p99 ${row.p99Ms} ms, shares ${row.shares.join(' / ')}${row.failed ? `, ${row.failed} failed` : ''}`);
      }
    }
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
    await rm(dir, { recursive: true, force: true });
  }
  const allFast = rows.find((r) => r.servers === 'all fast' && r.policy === 'least-request')!.p99Ms;
  const slowed = rows.find((r) => r.servers === 'one slowed' && r.policy === 'least-request')!.p99Ms;
  return { rows, p99OverAllFast: Math.round((slowed / allFast) * 100) / 100, settings: { calls, ratePerS, fastMs: FAST_MS, slowMs: SLOW_MS, model: `identity UINT8[1,${SIDE},${SIDE},3]` } };
}

export function printBalancingTable(result: Awaited<ReturnType<typeof balancingBench>>): void {
  const s = result.settings as { calls: number; ratePerS: number; fastMs: number; slowMs: number };
  console.log(`\nbalancing: 3 servers (1 worker, ${s.fastMs} ms a call; one slowed to ${s.slowMs} ms), ${s.calls} calls measured at ${s.ratePerS}/s open-loop`);
  console.log('| servers | policy | p50 ms | p99 ms | share of calls (slowed last) |\n|---|---|---|---|---|');
  for (const r of result.rows) console.log(`| ${r.servers} | ${r.policy} | ${r.p50Ms} | ${r.p99Ms} | ${r.shares.join(' / ')}${r.failed ? ` (${r.failed} failed)` : ''} |`);
  console.log(`least-request, p99 with one slowed / p99 all fast: **${result.p99OverAllFast}** (target <= 1.3)`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const { values } = parseArgs({ options: { calls: { type: 'string', default: '900' }, rate: { type: 'string', default: '60' }, json: { type: 'string' } } });
  const result = await balancingBench({ calls: Number(values.calls), ratePerS: Number(values.rate) });
  printBalancingTable(result);
  if (values.json) await writeFile(values.json, `${JSON.stringify(result, null, 2)}\n`);
  process.exit(0);
}
