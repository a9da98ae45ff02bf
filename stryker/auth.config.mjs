import { area } from './base.mjs';

export default area('auth', { mutate: ['src/core/auth/**/*.ts'], high: 90, low: 90 });
