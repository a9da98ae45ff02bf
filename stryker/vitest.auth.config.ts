import { unitConfig } from './vitest-base.js';

export default unitConfig(['test/unit/auth.test.ts', 'test/api-key.test.ts', 'test/key-stores.test.ts', 'test/key-store-atomic.test.ts', 'test/file-key-store-lock.test.ts', 'test/redis-key-store-races.test.ts', 'test/unit/redis-key-store-cache.test.ts', 'test/unit/redis-key-store.test.ts', 'test/unit/file-key-store.test.ts']);
