import { area } from './base.mjs';

// The auth area over its tests that start no CLI process: minutes instead of an hour on a busy 2-core machine.
export default area('auth-fast', { mutate: ['src/core/auth/**/*.ts'], high: 90, low: 90 });
