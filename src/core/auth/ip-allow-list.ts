import { BlockList, isIP } from 'node:net';

/** An `allowedIps` entry that is neither an IP address nor a CIDR range. */
export class InvalidAllowListEntryError extends RangeError {
  override readonly name = 'InvalidAllowListEntryError';
  constructor(readonly entry: string) {
    super(`"${entry}" is not an IP address or CIDR range (like 192.0.2.7, 10.0.0.0/8, 2001:db8::/32)`);
  }
}

/**
 * Adds one entry to a BlockList, or throws InvalidAllowListEntryError. BlockList itself refuses
 * an address that is not one and a prefix out of its family's range (/33 for IPv4, /129 for
 * IPv6); the prefix's spelling (digits, no sign, no leading zero) is checked here.
 */
function addEntry(list: BlockList, entry: string): void {
  const [address = '', prefix, extra] = entry.split('/');
  if (extra !== undefined || (prefix !== undefined && !/^(0|[1-9][0-9]{0,2})$/.test(prefix))) throw new InvalidAllowListEntryError(entry);
  const family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
  try {
    if (prefix === undefined) list.addAddress(address, family);
    else list.addSubnet(address, Number(prefix), family);
  } catch {
    throw new InvalidAllowListEntryError(entry);
  }
}

/** Checks every entry of an allow-list, naming the first bad one; returns the list unchanged. */
export function validateAllowedIps<T extends readonly string[] | undefined>(entries: T): T {
  const list = new BlockList();
  for (const entry of entries ?? []) {
    if (typeof entry !== 'string') throw new InvalidAllowListEntryError(String(entry));
    addEntry(list, entry);
  }
  return entries;
}

/**
 * Whether `ip` (as the adapter reports it; IPv4-mapped IPv6 counts as IPv4) is in the list.
 * Throws InvalidAllowListEntryError for a bad entry stored before entries were validated.
 */
export function ipAllowed(ip: string, entries: readonly string[]): boolean {
  const list = new BlockList();
  for (const entry of entries) addEntry(list, entry);
  // BlockList matches an IPv4-mapped client (::ffff:a.b.c.d) against IPv4 entries, and an IPv4
  // client against ::ffff: entries, by itself; a client address that is not one matches nothing.
  return list.check(ip, isIP(ip) === 6 ? 'ipv6' : 'ipv4');
}
