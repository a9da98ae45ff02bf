import { unitConfig } from './vitest-base.js';

// The key actions through dashboard.handle (no HTTP server), the create form, and the ceiling against parallel posts.
export default unitConfig(['test/unit/key-form.test.ts', 'test/unit/dashboard-keys.test.ts', 'test/dashboard-key-ceiling.test.ts']);
