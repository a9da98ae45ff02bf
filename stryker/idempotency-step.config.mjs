import { area } from './base.mjs';

// The Idempotency-Key step and its memory store alone (no busboy): seconds per mutant even on a busy machine.
export default area('idempotency-step', { mutate: ['src/core/pipeline/idempotency.ts', 'src/core/idempotency/store.ts'], high: 85, low: 85 });
