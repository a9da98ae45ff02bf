import { describe, expect, inject, it } from 'vitest';
import { createRemoveBgHandler } from '../src/core/index.js';
import { drivenRequest } from './helpers/core-request.js';
import { createTestKeys, TEST_PLANS } from './helpers/fixtures.js';

describe("a host's hooks that throw", () => {
  it('an onResponse that throws does not break the response', async () => {
    const keys = await createTestKeys();
    const handler = createRemoveBgHandler({
      keyStore: keys.store,
      plans: TEST_PLANS,
      inference: { address: inject('inferenceAddress') },
      onResponse: () => {
        throw new Error('the access log is full');
      },
      onInternalError: () => {},
    });
    const request = drivenRequest({ key: keys.unknown });
    request.body.end();
    const response = await handler.handle(request.request);
    expect(response.status).toBe(401);
    await handler.close();
  });

  it('an onInternalError that throws does not break the 500', async () => {
    const keys = await createTestKeys();
    const handler = createRemoveBgHandler({
      keyStore: {
        findByHash: async () => {
          throw new Error('database down');
        },
      },
      plans: TEST_PLANS,
      inference: { address: inject('inferenceAddress') },
      onInternalError: () => {
        throw new Error('the error reporter is down too');
      },
    });
    const request = drivenRequest({ key: keys.good });
    request.body.end();
    const response = await handler.handle(request.request);
    expect(response.status).toBe(503);
    expect(JSON.parse(response.body.toString()).code).toBe('service_unavailable');
    await handler.close();
  });
});
