/**
 * npm run bench:scrypt [-- --runs 7]
 *
 * What one dashboard password check costs at the default scrypt cost, beside the old default and
 * N = 2^17: wall time and process CPU time (libuv's thread included) per hash, medians, measured
 * alternately in one run so every cost sees the same machine load; and the memory scrypt needs
 * (128 x N x r bytes, as Node computes it).
 */
import { parseArgs } from 'node:util';
import { DEFAULT_SCRYPT_COST, PasswordHasher, type ScryptCost } from '../src/dashboard/passwords.js';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '7' } } });
const runs = Number(values.runs);
if (!Number.isInteger(runs) || runs < 5) throw new Error('--runs must be at least 5');

const costs: Array<[string, ScryptCost]> = [
  ['before (N=2^15, r=8, p=1)', { N: 2 ** 15, r: 8, p: 1 }],
  ['default (N=2^15, r=8, p=3)', DEFAULT_SCRYPT_COST],
  ['N=2^17, r=8, p=1', { N: 2 ** 17, r: 8, p: 1 }],
];
const samples = costs.map(() => ({ wall: [] as number[], cpu: [] as number[] }));
for (let run = 0; run < runs; run++) {
  for (const [i, [, cost]] of costs.entries()) {
    const hasher = new PasswordHasher(cost);
    const started = process.hrtime.bigint();
    const cpu = process.cpuUsage();
    await hasher.hash('a long enough password');
    const used = process.cpuUsage(cpu);
    samples[i]!.wall.push(Number(process.hrtime.bigint() - started) / 1e6);
    samples[i]!.cpu.push((used.user + used.system) / 1000);
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(`scrypt per password check, medians of ${runs} runs\n`);
console.log('| cost | memory | wall ms | CPU ms |\n|---|---|---|---|');
for (const [i, [label, cost]] of costs.entries()) {
  console.log(`| ${label} | ${(128 * cost.N * cost.r) / 1048576} MiB | ${median(samples[i]!.wall).toFixed(0)} | ${median(samples[i]!.cpu).toFixed(0)} |`);
}
