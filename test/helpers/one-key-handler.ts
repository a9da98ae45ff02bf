import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createRemoveBgHandler, FileKeyStore, type RemoveBgHandler } from '../../src/core/index.js';
import { captureInternalError, recordIssuedKeys } from './log-capture.js';

/**
 * A handler on the inference server at `inferenceAddress` (the suite's: `inject('inferenceAddress')`) with one pixel thread and one key of an `open` plan
 * (1000 requests a minute: the limits are not what these tests check), the key recorded so the
 * log scan can tell if it leaks. The caller closes the handler.
 */
export async function oneKeyHandler(accountId: string, inferenceAddress: string): Promise<{ handler: RemoveBgHandler; key: string }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), `bgcut-${accountId}-`));
  const store = new FileKeyStore({ file: path.join(dir, 'keys.json'), reloadIntervalMs: 0 });
  const { key } = await store.createKey({ accountId, plan: 'open' });
  recordIssuedKeys([key]);
  const handler = createRemoveBgHandler({
    keyStore: store,
    plans: { open: { requestsPerMinute: 1000 } },
    // A shared 2-core box can queue a model call for minutes: the deadline is not what is tested.
    inference: { address: inferenceAddress, timeoutMs: 480_000 },
    pixelThreads: 1,
    onInternalError: captureInternalError,
  });
  await handler.ready();
  return { handler, key };
}
