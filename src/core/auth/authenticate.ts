import { ApiError } from '../errors.js';
import type { IncomingHeaders } from '../http-types.js';
import { hashApiKey, isWellFormedApiKey, keyIdOf } from './api-key.js';
import { InvalidAllowListEntryError, ipAllowed } from './ip-allow-list.js';
import type { Account, KeyRecord, KeyStore } from './key-store.js';

export interface Identity {
  account: Account;
  /** Short key id, safe to log. */
  keyId: string;
}

/** Headers and query parameters where people put API keys by mistake; a key there gets a precise 401. */
const WRONG_HEADERS = ['authorization', 'x-api-token', 'api-key', 'apikey', 'x-apikey', 'x-auth-token', 'x-access-token'];
const WRONG_QUERY_PARAMS = ['api_key', 'apikey', 'apiKey', 'key', 'token', 'access_token', 'x-api-key'];

export const WWW_AUTHENTICATE = 'ApiKey realm="bgcut", header="X-API-KEY"';

function unauthorized(code: ConstructorParameters<typeof ApiError>[0]): ApiError {
  return new ApiError(code, { headers: { 'www-authenticate': WWW_AUTHENTICATE } });
}

/** Finds the API key of a request in X-API-KEY, or explains precisely why there is none. */
export function extractApiKey(headers: IncomingHeaders, url: string): string {
  const value = headers['x-api-key'];
  if (value === undefined) {
    const query = new URL(url, 'http://localhost').searchParams;
    if (WRONG_HEADERS.some((h) => headers[h] !== undefined) || WRONG_QUERY_PARAMS.some((p) => query.has(p))) {
      throw unauthorized('api_key_wrong_header');
    }
    throw unauthorized('missing_api_key');
  }
  // Node joins repeated headers with ", ", and adapters may pass arrays: both mean two keys.
  if (Array.isArray(value) || value.includes(',')) {
    throw unauthorized('multiple_api_keys');
  }
  if (value.length === 0) throw unauthorized('missing_api_key');
  if (!isWellFormedApiKey(value)) throw unauthorized('malformed_api_key');
  return value;
}

export interface AuthRequest {
  headers: IncomingHeaders;
  url: string;
  /** The client's address as the adapter sees it (after the host app's trusted-proxy rules). */
  clientIp?: string | undefined;
}

/**
 * Identifies the caller (401s), then checks they may proceed (403s). `onIdentified` hears of the
 * identity before the 403 checks, so a refusal can still carry the account's rate-limit headers.
 */
export async function authenticate(
  request: AuthRequest,
  store: KeyStore,
  onIdentified?: (identity: Identity) => void,
  now = new Date(),
): Promise<Identity> {
  const key = extractApiKey(request.headers, request.url);
  const hash = hashApiKey(key);
  let found;
  try {
    found = await store.findByHash(hash);
  } catch (error) {
    // A store that cannot answer must not turn into a 401: the key may well be valid.
    throw new ApiError('service_unavailable', { detail: 'The key store cannot be reached.', headers: { 'retry-after': '5' }, cause: error });
  }
  if (!found) throw unauthorized('invalid_api_key');
  if (found.key.revokedAt) throw unauthorized('revoked_api_key');
  if (found.key.expiresAt && Date.parse(found.key.expiresAt) <= now.getTime()) throw unauthorized('expired_api_key');
  const identity = { account: found.account, keyId: keyIdOf(hash) };
  onIdentified?.(identity);
  if (found.account.status !== 'active') throw new ApiError('account_suspended');
  checkRestrictions(found.key, request);
  return identity;
}

/** Keys may be limited to client addresses (or CIDR ranges) and to browser origins. */
function checkRestrictions(key: KeyRecord, request: AuthRequest): void {
  if (key.allowedIps?.length) {
    if (!request.clientIp || !ipAllowedOrMisconfigured(key, request.clientIp)) {
      throw new ApiError('ip_not_allowed');
    }
  }
  if (key.allowedOrigins?.length) {
    const origin = request.headers.origin;
    if (typeof origin !== 'string' || !key.allowedOrigins.includes(origin)) {
      throw new ApiError('origin_not_allowed');
    }
  }
}

/**
 * A stored entry that is not an address or range (written before entries were validated, or by
 * hand) is the key owner's configuration error: a 500 with its own code, reported with the key id.
 */
function ipAllowedOrMisconfigured(key: KeyRecord, clientIp: string): boolean {
  try {
    return ipAllowed(clientIp, key.allowedIps!);
  } catch (error) {
    if (!(error instanceof InvalidAllowListEntryError)) throw error;
    throw new ApiError('api_key_misconfigured', {
      detail: "This API key's IP allow-list is not valid; replace the key.",
      cause: new Error(`key ${key.id}: allowedIps entry ${error.message}`),
    });
  }
}
