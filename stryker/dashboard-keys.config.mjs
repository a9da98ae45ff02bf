import { area } from './base.mjs';

export default area('dashboard-keys', { mutate: ['src/dashboard/handlers/keys.ts', 'src/dashboard/key-form.ts'], high: 85, low: 85 });
