import type { RedisClient } from '../core/redis.js';
import type { ActivityRecorder } from '../core/activity/recorder.js';
import type { KeyAdmin } from '../core/auth/key-store.js';
import type { RemoveBgHandler } from '../core/handler.js';
import type { CoreRequest } from '../core/http-types.js';
import type { PasswordHasher } from './passwords.js';
import type { DashboardStore } from './store.js';
import type { SignInThrottleOptions } from './throttle.js';
import type { WebhookSecretStore } from '../core/jobs/webhooks/secrets.js';
import type { DeliveryLog } from '../core/jobs/webhooks/deliveries.js';

export interface DashboardOptions {
  /** The endpoint's handler: Try it runs through it, the usage page reads its limits. */
  handler: RemoveBgHandler;
  /** Where keys are made, listed, rotated and revoked: the handler's FileKeyStore or RedisKeyStore. */
  keyStore: KeyAdmin;
  /** Sessions, account holders and activity: `new FileDashboardStore(keyStore)` or `new RedisDashboardStore({ redis })`. */
  store: DashboardStore;
  /** The recorder given to the handler (option `activity`), so pages show requests not yet written. */
  activity?: ActivityRecorder;
  /** Signs cookies: at least 32 bytes, the same on every instance. */
  secret: string | Buffer;
  /** Where the adapter mounts the dashboard. Default `/dashboard`. */
  basePath?: string;
  /**
   * The host app's own sign-in: resolve with the account id of the person making the request,
   * or undefined when nobody is signed in (they are sent to `signInUrl`). When given, the
   * embedded email-and-password sign-in is off.
   */
  authenticateAccountHolder?: (request: CoreRequest) => Promise<string | undefined>;
  /** With authenticateAccountHolder: the host's sign-in page (`?next=` is appended). */
  signInUrl?: string;
  /** With authenticateAccountHolder: the host's sign-out address, linked from every page. */
  signOutUrl?: string;
  /** Lifetime of an embedded sign-in, in ms. Default 12 hours. */
  sessionTtlMs?: number;
  /** Secure cookies: `auto` (the default) when the request came over HTTPS. */
  secureCookies?: boolean | 'auto';
  /** Origins besides the dashboard's own allowed to post to it (such as the public one behind a proxy). */
  trustedOrigins?: string[];
  /** Sign-in throttling; counts are shared through `redis` when given. */
  throttle?: SignInThrottleOptions;
  redis?: RedisClient;
  /** Prefix of the throttle's Redis keys. Default `bgcut`. */
  keyPrefix?: string;
  /** The endpoint's address for the curl line. Default: this origin + `/v1/remove-bg`. */
  endpointUrl?: string;
  /** Name in the page header. Default `bgcut`. */
  productName?: string;
  onInternalError?: (error: unknown) => void;
  /**
   * Hashes and checks holders' passwords. Default: scrypt at DEFAULT_SCRYPT_COST. Give
   * `new PasswordHasher({ N, r, p })` to raise the cost; a sign-in rehashes a password stored at
   * another cost. (Tests give a lower one to stay fast.)
   */
  passwordHasher?: PasswordHasher;
  /** Webhooks of jobs: the handler's signing-secret store (its holders make secrets here) and delivery log (listed here). */
  webhooks?: { secrets: WebhookSecretStore; deliveries?: DeliveryLog };
}

export function resolveDashboardOptions(options: DashboardOptions) {
  const secret = typeof options.secret === 'string' ? Buffer.from(options.secret) : options.secret;
  if (!secret || secret.length < 32) throw new RangeError('dashboard secret must be at least 32 bytes (e.g. randomBytes(32).toString("hex"))');
  if (!options.handler?.handleForAccount) throw new TypeError('dashboard: handler (from createRemoveBgHandler) is required');
  if (!options.keyStore?.createKey) throw new TypeError('dashboard: keyStore must be a FileKeyStore, RedisKeyStore or another KeyAdmin');
  if (!options.store?.findSession) throw new TypeError('dashboard: store (FileDashboardStore or RedisDashboardStore) is required');
  const basePath = (options.basePath ?? '/dashboard').replace(/\/+$/, '');
  if (!/^\/[A-Za-z0-9/_-]*$/.test(basePath)) throw new RangeError(`dashboard basePath must be a path like /dashboard, got "${options.basePath}"`);
  if (options.authenticateAccountHolder && !options.signInUrl) throw new TypeError('dashboard: signInUrl is required with authenticateAccountHolder');
  const sessionTtlMs = options.sessionTtlMs ?? 12 * 3_600_000;
  if (!Number.isInteger(sessionTtlMs) || sessionTtlMs < 60_000) throw new RangeError('dashboard sessionTtlMs must be at least 60000');
  for (const origin of options.trustedOrigins ?? []) {
    if (new URL(origin).origin !== origin) throw new RangeError(`dashboard trustedOrigins: "${origin}" is not an origin like https://app.example`);
  }
  return {
    ...options,
    secret,
    basePath,
    sessionTtlMs,
    secureCookies: options.secureCookies ?? ('auto' as const),
    trustedOrigins: new Set(options.trustedOrigins ?? []),
    productName: options.productName ?? 'bgcut',
    keyPrefix: options.keyPrefix ?? 'bgcut',
    onInternalError: options.onInternalError ?? ((error: unknown) => console.error('bgcut dashboard: internal error:', error)),
  };
}

export type ResolvedDashboardOptions = ReturnType<typeof resolveDashboardOptions>;
