import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { abortStorm, inferenceRuns, settle } from './helpers/abort-storm.js';
import { photoForm, startStressApp, type StressApp } from './helpers/stress-app.js';

// The short abort storm (`npm run stress` runs 1 000 requests): one inference slot, so requests
// queue behind each other and many are dropped while waiting for it.
const REQUESTS = 60;

describe('abort storm: requests dropped at random points leave nothing behind', () => {
  let app: StressApp;
  let form: { body: Buffer; contentType: string };
  const metricsUrl = () => inject('inferenceMetricsUrl');

  beforeAll(async () => {
    app = await startStressApp({ inferenceAddress: inject('inferenceAddress') });
    form = await photoForm();
  });
  afterAll(async () => {
    await app?.close();
  });

  it(`${REQUESTS} requests dropped during headers, mid-upload, waiting for a slot and during inference`, async () => {
    // One whole cutout first: warms up, and gives the scale of an inference here.
    const started = performance.now();
    const warm = await fetch(`${app.baseUrl}/v1/remove-bg`, { method: 'POST', headers: { 'x-api-key': app.key, 'content-type': form.contentType }, body: form.body });
    expect(warm.status).toBe(200);
    const cutoutMs = performance.now() - started;
    const handlesBefore = process.getActiveResourcesInfo().length;
    const rssBefore = process.memoryUsage().rss;
    const runsBefore = await inferenceRuns(metricsUrl());

    const storm = await abortStorm({
      baseUrl: app.baseUrl,
      path: '/v1/remove-bg',
      key: app.key,
      body: form.body,
      contentType: form.contentType,
      requests: REQUESTS,
      concurrency: 16,
      inferenceAbortMs: 1.5 * cutoutMs,
    });

    // Event-based: wait (bounded) until the API says it holds nothing, then check everything.
    const held = await settle(app.holdings, (h) => h.inFlight === 0 && h.slots === 0 && h.slotWaiters === 0 && h.pixels === 0, 60_000);
    const inProgress = await app.inProgress();
    const runs = (await inferenceRuns(metricsUrl())) - runsBefore;
    const handlesAfter = process.getActiveResourcesInfo().length;
    const rssAfter = process.memoryUsage().rss;
    console.log(
      `abort storm: ${JSON.stringify(storm)}; cutout ${cutoutMs.toFixed(0)} ms; after: ${JSON.stringify(held)}, inProgress ${inProgress}, ` +
        `inferences run ${runs}, handles ${handlesBefore} -> ${handlesAfter}, RSS ${(rssBefore / 2 ** 20).toFixed(0)} -> ${(rssAfter / 2 ** 20).toFixed(0)} MiB`,
    );

    expect(held).toEqual({ inFlight: 0, slots: 0, slotWaiters: 0, pixels: 0 });
    expect(inProgress).toBe(0);
    // A run is owed to each answered cutout, and at most one to each request dropped while it
    // may have been in inference; a request dropped while queued is owed none.
    expect(runs).toBeLessThanOrEqual((storm.answered['200'] ?? 0) + storm.droppedAfterUpload.inference);
    expect(handlesAfter).toBeLessThanOrEqual(handlesBefore + 5);
    expect(rssAfter - rssBefore).toBeLessThan(256 * 2 ** 20);
    expect(app.internalErrors.map(String)).toEqual([]);
  }, 300_000);
});
