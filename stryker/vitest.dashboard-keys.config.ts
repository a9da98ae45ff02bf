import { unitConfig } from './vitest-base.js';

export default unitConfig(['test/dashboard.test.ts', 'test/dashboard-key-ceiling.test.ts']);
