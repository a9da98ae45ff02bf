import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { FileKeyStore } from '../src/core/index.js';
import { settle, holdings } from './helpers/abort-storm.js';
import { startApiProcess, type ApiProcess } from './helpers/api-process.js';
import { startLoad, tally } from './helpers/load.js';
import { recordIssuedKeys } from './helpers/log-capture.js';
import { photoForm } from './helpers/stress-app.js';

/** Resolves once the process has printed `text` (the helper's own listener has appended each chunk to its output before this one runs). */
function printed(api: ApiProcess, text: string): Promise<void> {
  return new Promise((resolve) => {
    const check = () => {
      if (!api.output().includes(text)) return;
      api.child.stdout!.off('data', check);
      resolve();
    };
    api.child.stdout!.on('data', check);
    check();
  });
}

describe('SIGTERM to an API process under load (handler.close() drains)', () => {
  let api: ApiProcess | undefined;
  afterAll(async () => {
    await api?.stop();
  });

  it('requests in flight finish with 200, new ones get 503, then the process exits 0', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-shutdown-'));
    const keysFile = path.join(dir, 'keys.json');
    const key = (await new FileKeyStore({ file: keysFile, reloadIntervalMs: 0 }).createKey({ accountId: 'acct_shutdown', plan: 'storm' })).key;
    recordIssuedKeys([key]);
    api = await startApiProcess({ STRESS_KEYS_FILE: keysFile, STRESS_INFERENCE: inject('inferenceAddress'), STRESS_MAX_INFERENCES: '1' });
    const form = await photoForm();
    const url = `${api.baseUrl}/v1/remove-bg`;
    const metrics = async () => holdings(await (await fetch(`${api!.baseUrl}/metrics`)).text());

    const load = startLoad({ url, key, ...form, workers: 3 });
    // Event-based: SIGTERM once at least two requests are inside the API.
    const before = await settle(metrics, (h) => h.inFlight >= 2, 60_000);
    expect(before.inFlight).toBeGreaterThanOrEqual(2);
    const inFlightAtSignal = before.inFlight;
    const signalledAt = load.now();
    api.child.kill('SIGTERM');
    // Event-based: the process says it has begun draining (examples/graceful-shutdown.ts logs it
    // as it calls handler.close()), rather than a sleep that guesses how long a signal takes.
    await printed(api, 'SIGTERM: draining requests in progress');
    // A new request while draining: 503 at once.
    const late = await fetch(url, { method: 'POST', headers: { 'x-api-key': key, 'content-type': form.contentType }, body: form.body });
    const lateProblem = (await late.json()) as { code: string };
    const exitCode = await api.exited;
    const all = await load.stop();
    const drained = all.filter((a) => a.sentAt < signalledAt && a.at > signalledAt);
    const after = all.filter((a) => a.sentAt >= signalledAt);
    console.log(
      `shutdown: ${inFlightAtSignal} in flight at SIGTERM, answered ${JSON.stringify(tally(drained))} (last at +${Math.round(Math.max(...drained.map((a) => a.at)) - signalledAt)} ms); ` +
        `late request ${late.status} ${lateProblem.code}; sent after SIGTERM: ${JSON.stringify(tally(after))}; exit ${exitCode}`,
    );

    expect(late.status).toBe(503);
    expect(lateProblem.code).toBe('service_unavailable');
    expect(late.headers.get('retry-after')).toBeTruthy();
    // Every request that was inside the API at SIGTERM was answered with its cutout...
    expect(drained.length).toBeGreaterThanOrEqual(inFlightAtSignal);
    expect(tally(drained)).toEqual({ 200: drained.length });
    // ...and every one sent after it got 503 service_unavailable, or no connection once it exited.
    expect(Object.keys(tally(after)).filter((s) => s !== '503 service_unavailable' && s !== 'error')).toEqual([]);
    expect(exitCode).toBe(0);
  }, 180_000);
});
