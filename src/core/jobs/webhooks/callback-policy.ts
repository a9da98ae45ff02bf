import { isIP } from 'node:net';
import { ApiError } from '../../errors.js';
import { checkAddress } from '../../image-url/address-policy.js';
import { MAX_URL_LENGTH, type ResolvedImageUrlOptions } from '../../image-url/options.js';
import type { PinnedTarget } from '../../image-url/pinned-request.js';

/** Where a callback may be sent: the URL, and the address checked for it (connect to this one, no second lookup). */
export type CallbackTarget = PinnedTarget;

export type CallbackPolicy = Pick<ResolvedImageUrlOptions, 'allowedPorts' | 'resolver' | 'allowLoopbackForTesting'>;

/**
 * The `image_url` address policy, for a `callback_url`: http(s) only, no credentials, the allowed
 * ports, the name resolved once and every address checked to be public (so a caller cannot make
 * the API POST to its own network). Refused with one generic `callback_url_refused`; the reason
 * goes to `onRefusal`. Checked when the job is accepted and again before every delivery.
 */
export async function checkCallbackUrl(raw: string, policy: CallbackPolicy, onRefusal?: (reason: string) => void): Promise<CallbackTarget> {
  const refuse = (reason: string) => {
    onRefusal?.(`callback_url refused: ${reason}`);
    return new ApiError('callback_url_refused');
  };
  if (raw.length > MAX_URL_LENGTH) throw refuse(`longer than ${MAX_URL_LENGTH} characters`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw refuse('not a URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw refuse(`scheme ${url.protocol}`);
  if (url.username || url.password) throw refuse('carries credentials');
  const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
  if (!policy.allowedPorts.includes(port)) throw refuse(`port ${port} is not allowed`);
  const hostname = url.hostname.replace(/^\[|\]$/g, '');
  let addresses: { address: string; family: number }[];
  if (isIP(hostname)) addresses = [{ address: hostname, family: isIP(hostname) }];
  else {
    try {
      addresses = await policy.resolver(hostname);
    } catch (error) {
      throw refuse(`"${hostname.slice(0, 100)}" could not be resolved (${(error as NodeJS.ErrnoException).code ?? 'lookup failed'})`);
    }
  }
  if (addresses.length === 0) throw refuse(`"${hostname.slice(0, 100)}" has no address`);
  for (const { address } of addresses) {
    const verdict = checkAddress(address, { allowLoopback: policy.allowLoopbackForTesting });
    if (!verdict.allowed) throw refuse(`"${hostname.slice(0, 100)}" is ${address}, ${verdict.reason}`);
  }
  return { url, ...addresses[0]! };
}
