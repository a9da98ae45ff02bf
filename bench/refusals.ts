/**
 * npm run bench:refusals [-- --duration 10 --connections 50]
 *
 * Refusal throughput of one API instance (the example Express app, its own process) under
 * autocannon: the 401 path (a well-formed key that was never issued: hashed and looked up) and
 * the 429 path (a key whose plan allows one request a minute, already used). Reports requests
 * per second, p50/p99 latency and the API's RSS before and after each run, and checks that
 * every answer was the refusal and that nothing reached the inference server (its session.run
 * count, from its Prometheus metrics, does not move).
 */
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { FileKeyStore, generateApiKey } from '../src/core/index.js';
import { startApiProcess } from '../test/helpers/api-process.js';
import { inferenceRuns } from '../test/helpers/abort-storm.js';
import { startInferenceProcess } from '../test/helpers/inference-process.js';

const { values } = parseArgs({ options: { duration: { type: 'string', default: '10' }, connections: { type: 'string', default: '50' } } });
const duration = Number(values.duration);
const connections = Number(values.connections);

const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-refusals-'));
const keysFile = path.join(dir, 'keys.json');
const store = new FileKeyStore({ file: keysFile, reloadIntervalMs: 0 });
const tinyKey = (await store.createKey({ accountId: 'acct_bench_tiny', plan: 'tiny' })).key;

const inference = await startInferenceProcess(['--metrics-port', '0']);
const api = await startApiProcess({ STRESS_KEYS_FILE: keysFile, STRESS_INFERENCE: inference.address });
const body = Buffer.concat([
  Buffer.from('--B\r\nContent-Disposition: form-data; name="file"; filename="a.jpg"\r\nContent-Type: image/jpeg\r\n\r\n'),
  Buffer.alloc(2048, 1),
  Buffer.from('\r\n--B--\r\n'),
]);
const mb = (bytes: number) => (bytes / 2 ** 20).toFixed(0);

try {
  // Use up the tiny plan's one request.
  await fetch(`${api.baseUrl}/v1/remove-bg`, { method: 'POST', headers: { 'x-api-key': tinyKey } });
  const runsBefore = await inferenceRuns(inference.metricsUrl!);
  const rows: string[] = [];
  for (const [label, key, expected] of [
    ['401 invalid_api_key', generateApiKey(), 401],
    ['429 rate_limited', tinyKey, 429],
  ] as const) {
    const rssBefore = api.rss();
    const result = await autocannon({
      url: `${api.baseUrl}/v1/remove-bg`,
      method: 'POST',
      headers: { 'x-api-key': key, 'content-type': 'multipart/form-data; boundary=B' },
      body,
      connections,
      duration,
    });
    const rssAfter = api.rss();
    const statuses = Object.fromEntries(Object.entries(result.statusCodeStats ?? {}).map(([s, v]) => [s, v.count]));
    const wrong = Object.entries(statuses).filter(([s]) => Number(s) !== expected);
    rows.push(
      `| ${label} | ${result.requests.average.toFixed(0)} | ${result.latency.p50} | ${result.latency.p99} | ${mb(rssBefore)} -> ${mb(rssAfter)} | ${result.errors} | ${JSON.stringify(statuses)} |`,
    );
    if (wrong.length > 0 || result.errors > 0) console.error(`${label}: unexpected answers ${JSON.stringify(statuses)}, ${result.errors} errors`);
  }
  const runs = (await inferenceRuns(inference.metricsUrl!)) - runsBefore;
  console.log(`refusal throughput: one Express API process, autocannon ${connections} connections x ${duration} s, ${os.availableParallelism()} cores (shared)`);
  console.log('| path | req/s (mean) | p50 ms | p99 ms | API RSS MiB before -> after | errors | statuses |');
  console.log('|---|---|---|---|---|---|---|');
  for (const row of rows) console.log(row);
  console.log(`inferences run during the refusal runs: ${runs}`);
  if (runs !== 0) process.exitCode = 1;
} finally {
  await api.stop();
  await inference.stop();
}
