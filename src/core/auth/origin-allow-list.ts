/** An `allowedOrigins` entry that is not a web origin (scheme, host and port, nothing else). */
export class InvalidAllowedOriginError extends RangeError {
  override readonly name = 'InvalidAllowedOriginError';
  constructor(readonly entry: string) {
    super(`"${entry}" is not an origin (such as https://shop.example or http://localhost:8080, without a path or a trailing slash)`);
  }
}

/**
 * Whether an entry is an http(s) origin exactly as a browser sends it in the Origin header: the
 * comparison at request time is by string, so `https://shop.example/` or `HTTPS://shop.example`
 * would never match anything.
 */
export function isOrigin(entry: string): boolean {
  try {
    const url = new URL(entry);
    return (url.protocol === 'https:' || url.protocol === 'http:') && url.origin === entry;
  } catch {
    return false;
  }
}

/** Checks every entry of an origin allow-list, naming the first bad one; returns the list unchanged. */
export function validateAllowedOrigins<T extends readonly string[] | undefined>(entries: T): T {
  for (const entry of entries ?? []) if (!isOrigin(entry)) throw new InvalidAllowedOriginError(entry);
  return entries;
}
