// A stand-in for session-worker.js that speaks the same protocol (worker-protocol.ts) but
// misbehaves on purpose, to test the session pool's handling of dying and stuck workers. Its
// behaviour is named by `modelFile`:
//   crash-after-ready  loads, reports ready, then exits with code 1 at once
//   crash-on-run       loads, and exits with code 1 on the first job
//   hang-on-run        loads, and never answers a job
import { parentPort } from 'node:worker_threads';
import { workerData } from 'node:worker_threads';

const mode = workerData.modelFile;
const spec = { name: 'input', datatype: 'UINT8', shape: [1] };
parentPort.postMessage({ type: 'ready', inputs: [spec], outputs: [{ ...spec, name: 'output' }], provider: 'scripted', skipped: [] });
if (mode === 'crash-after-ready') setTimeout(() => process.exit(1), 0);
parentPort.on('message', () => {
  if (mode === 'crash-on-run') process.exit(1);
  // hang-on-run: keep the job, answer nothing.
});
