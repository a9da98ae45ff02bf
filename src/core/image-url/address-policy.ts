import ipaddr from 'ipaddr.js';

export type AddressVerdict = { allowed: true } | { allowed: false; reason: string };

/** Loopback addresses, which only the test-only option lets through. */
const LOOPBACK = new Set(['loopback']);

/**
 * Whether the API may connect to this address on a caller's behalf: only global unicast.
 * Refused: loopback, private, carrier-grade NAT, link-local (cloud metadata at 169.254.169.254),
 * unique-local, multicast, broadcast, unspecified, reserved and documentation ranges, and any
 * IPv6 form that embeds one of those (IPv4-mapped, IPv4-compatible, NAT64 64:ff9b::/96), plus
 * 6to4, Teredo and the local-use NAT64 prefix, which lead to addresses we cannot see.
 */
export function checkAddress(address: string, options: { allowLoopback?: boolean } = {}): AddressVerdict {
  if (!ipaddr.isValid(address)) return { allowed: false, reason: 'not an IP address' };
  let ip = ipaddr.parse(address);
  let form = '';
  if (ip.kind() === 'ipv6') {
    const v6 = ip as ipaddr.IPv6;
    const embedded = embeddedIpv4(v6);
    if (embedded) {
      form = `${embedded.form} form of `;
      ip = embedded.ipv4;
    }
  }
  const range = ip.range();
  if (range === 'unicast') return { allowed: true };
  if (options.allowLoopback && LOOPBACK.has(range)) return { allowed: true };
  return { allowed: false, reason: `${form}a ${range} address` };
}

/** The IPv4 address inside an IPv6 one that is only a wrapper around it, and how it is wrapped. */
function embeddedIpv4(ip: ipaddr.IPv6): { ipv4: ipaddr.IPv4; form: string } | undefined {
  const parts = ip.parts;
  const v4 = () => ipaddr.fromByteArray(ip.toByteArray().slice(12)) as ipaddr.IPv4;
  const zeros = (from: number, to: number) => parts.slice(from, to).every((p) => p === 0);
  // ::a.b.c.d (deprecated IPv4-compatible), but not :: and ::1, which are their own ranges.
  if (zeros(0, 6) && (parts[6] !== 0 || parts[7]! > 1)) return { ipv4: v4(), form: 'IPv4-compatible' };
  if (zeros(0, 5) && parts[5] === 0xffff) return { ipv4: v4(), form: 'IPv4-mapped' };
  // NAT64's well-known prefix: a gateway would carry the connection on to the IPv4 address.
  if (parts[0] === 0x64 && parts[1] === 0xff9b && zeros(2, 6)) return { ipv4: v4(), form: 'NAT64' };
  return undefined;
}
