import { area } from './base.mjs';

export default area('idempotency', { mutate: ['src/core/pipeline/idempotency.ts', 'src/core/multipart.ts', 'src/core/idempotency/store.ts'], high: 85, low: 85 });
