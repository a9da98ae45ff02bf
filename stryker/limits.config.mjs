import { area } from './base.mjs';

export default area('limits', { mutate: ['src/core/limits/**/*.ts'], high: 90, low: 90 });
