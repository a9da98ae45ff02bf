import { unitConfig } from './vitest-base.js';

export default unitConfig(['test/unit/idempotency.test.ts']);
