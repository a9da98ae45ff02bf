import { unitConfig } from './vitest-base.js';

// auth without the tests that start CLI processes (key-stores, file-key-store-lock): for a quick run.
export default unitConfig(['test/unit/auth.test.ts', 'test/api-key.test.ts', 'test/key-store-atomic.test.ts', 'test/redis-key-store-races.test.ts']);
