import { unitConfig } from './vitest-base.js';

export default unitConfig(['test/unit/idempotency.test.ts', 'test/unit/multipart.test.ts', 'test/output-options.test.ts']);
