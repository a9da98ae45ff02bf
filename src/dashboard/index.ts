/**
 * `bgcut/dashboard`: the account holders' dashboard (sign-in, developer settings, usage, Try it),
 * framework-neutral; mount it with `bgcut/express-dashboard` or `bgcut/fastify-dashboard`.
 */
export { createDashboard, MAX_ACTIVE_KEYS, type Dashboard } from './dashboard.js';
export type { DashboardOptions } from './options.js';
export type { DashboardStore, AccountHolder, SessionRecord } from './store.js';
export { EmailTakenError } from './store.js';
export { FileDashboardStore, type FileDashboardStoreOptions } from './stores/file-store.js';
export { RedisDashboardStore, type RedisDashboardStoreOptions } from './stores/redis-store.js';
export { hashPassword, verifyPassword, passwordProblem, PasswordHasher, DEFAULT_SCRYPT_COST, MIN_PASSWORD_LENGTH, type ScryptCost, type PasswordCheck } from './passwords.js';
export { setAccountHolder } from './holders.js';
export type { SignInThrottleOptions } from './throttle.js';
