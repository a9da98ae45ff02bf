import { BlockList, isIP } from 'node:net';

/** An `allowedIps` entry that is neither an IP address nor a CIDR range. */
export class InvalidAllowListEntryError extends RangeError {
  override readonly name = 'InvalidAllowListEntryError';
  constructor(readonly entry: string) {
    super(`"${entry}" is not an IP address or CIDR range (like 192.0.2.7, 10.0.0.0/8, 2001:db8::/32)`);
  }
}

/** Adds one entry to a BlockList, or throws InvalidAllowListEntryError. */
function addEntry(list: BlockList, entry: string): void {
  const [address = '', prefix, extra] = entry.split('/');
  const version = isIP(address);
  const maxPrefix = version === 6 ? 128 : 32;
  const prefixOk = prefix === undefined || (/^(0|[1-9][0-9]{0,2})$/.test(prefix) && Number(prefix) <= maxPrefix);
  if (version === 0 || extra !== undefined || !prefixOk) throw new InvalidAllowListEntryError(entry);
  const family = version === 6 ? 'ipv6' : 'ipv4';
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
  const v4 = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  const address = v4 ? v4[1]! : ip;
  const version = isIP(address);
  if (version === 0) return false;
  const list = new BlockList();
  for (const entry of entries) addEntry(list, entry);
  return list.check(address, version === 6 ? 'ipv6' : 'ipv4');
}
