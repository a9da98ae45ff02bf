import dns from 'node:dns';

/** Resolves a host name to every address it has, once. */
export type Resolver = (hostname: string) => Promise<{ address: string; family: number }[]>;

export interface ImageUrlOptions {
  /** Accept `image_url` (form field or JSON body). Default true. */
  enabled?: boolean;
  /**
   * Only fetch from these hosts (exact names, or `*.example.com` for its subdomains), e.g. your
   * own CDN. Off by default: any host whose addresses are all public. Addresses are checked either way.
   */
  allowedHosts?: string[];
  /**
   * Ports fetched from, on every hop. Default [80, 443]: the API does not let its callers probe
   * other services on public hosts. Add a port only for an image host that needs it.
   */
  allowedPorts?: number[];
  /** Longest the whole fetch may take, redirects included, in ms. Default 10 000. */
  timeoutMs?: number;
  /** How names are resolved (once per hop). Default: the system resolver (dns.lookup). */
  resolver?: Resolver;
  /**
   * TESTS ONLY: also fetch from loopback addresses (127.0.0.0/8, ::1), so a test can serve
   * images from a local server. Never set it in production: it opens the API's own host to its callers.
   */
  allowLoopbackForTesting?: boolean;
}

export const MAX_REDIRECTS = 3;
export const MAX_URL_LENGTH = 2048;

export type ResolvedImageUrlOptions = ReturnType<typeof resolveImageUrlOptions>;

const systemResolver: Resolver = (hostname) => dns.promises.lookup(hostname, { all: true, verbatim: true });

/** Defaults and checks; a risky setting is allowed but said out loud. */
export function resolveImageUrlOptions(options: ImageUrlOptions = {}, warn: (message: string) => void = console.warn) {
  const resolved = {
    enabled: options.enabled ?? true,
    allowedHosts: options.allowedHosts?.map((host) => host.trim().toLowerCase()),
    allowedPorts: [...new Set(options.allowedPorts ?? [80, 443])],
    timeoutMs: options.timeoutMs ?? 10_000,
    resolver: options.resolver ?? systemResolver,
    allowLoopbackForTesting: options.allowLoopbackForTesting ?? false,
  };
  if (!Number.isInteger(resolved.timeoutMs) || resolved.timeoutMs <= 0) throw new RangeError('imageUrl.timeoutMs must be a positive integer');
  if (resolved.allowedPorts.length === 0 || resolved.allowedPorts.some((port) => !Number.isInteger(port) || port < 1 || port > 65535)) {
    throw new RangeError('imageUrl.allowedPorts must be a non-empty list of ports 1-65535');
  }
  for (const host of resolved.allowedHosts ?? []) {
    if (!/^(\*\.)?[a-z0-9.-]+$/.test(host) || host.startsWith('.')) throw new RangeError(`imageUrl.allowedHosts: "${host}" is not a host name or *.domain`);
  }
  if (resolved.allowedHosts?.length === 0) throw new RangeError('imageUrl.allowedHosts is empty: leave it out to allow any public host, or set enabled: false');
  if (resolved.allowLoopbackForTesting) warn('bgcut: imageUrl.allowLoopbackForTesting is on: image_url may fetch from this machine. Tests only.');
  return resolved;
}

export function hostAllowed(hostname: string, allowedHosts: string[] | undefined): boolean {
  if (!allowedHosts) return true;
  const host = hostname.toLowerCase();
  return allowedHosts.some((entry) => (entry.startsWith('*.') ? host.endsWith(entry.slice(1)) && host.length > entry.length - 1 : host === entry));
}
