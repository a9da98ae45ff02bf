import { describe, expect, inject, it } from 'vitest';
import { createRemoveBgHandler } from '../src/core/index.js';
import { drivenRequest, pause, uploadRequest } from './helpers/core-request.js';
import { createTestKeys, multipartBody, TEST_PLANS } from './helpers/fixtures.js';
import { objectOnTexture } from './helpers/synthetic-image.js';

describe('handler.close() drains', () => {
  it('a request in progress finishes, a new one gets 503 at once, then close() resolves', async () => {
    const keys = await createTestKeys();
    const handler = createRemoveBgHandler({ keyStore: keys.store, plans: TEST_PLANS, inference: { address: inject('inferenceAddress') }, onInternalError: () => {} });
    await handler.ready();
    const image = (await objectOnTexture(320, 240)).bytes;
    // In progress: admitted, its upload still arriving.
    const { body, contentType } = multipartBody([{ name: 'file', filename: 'a.jpg', type: 'image/jpeg', data: image }]);
    const inProgress = drivenRequest({ key: keys.good, contentType });
    const answer = handler.handle(inProgress.request);
    inProgress.body.write(body.subarray(0, 100));
    await pause(200);

    let closed = false;
    const closing = handler.close().then(() => (closed = true));
    const late = await handler.handle(uploadRequest(keys.good, image).request);
    expect(late.status).toBe(503);
    expect(JSON.parse(late.body.toString()).code).toBe('service_unavailable');
    expect(late.headers['retry-after']).toBeDefined();
    expect(closed).toBe(false);

    inProgress.body.end(body.subarray(100));
    expect((await answer).status).toBe(200);
    await closing;
  });

  it('ends requests still in progress with a 503 once shutdownTimeoutMs has passed', async () => {
    const keys = await createTestKeys();
    const handler = createRemoveBgHandler({
      keyStore: keys.store,
      plans: TEST_PLANS,
      inference: { address: inject('inferenceAddress') },
      shutdownTimeoutMs: 300,
      onInternalError: () => {},
    });
    const stuck = drivenRequest({ key: keys.good });
    const answer = handler.handle(stuck.request);
    await pause(100);
    await handler.close();
    const response = await answer;
    expect(response.status).toBe(503);
    expect(JSON.parse(response.body.toString()).code).toBe('service_unavailable');
  });
});
