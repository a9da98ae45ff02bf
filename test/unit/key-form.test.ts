import { describe, expect, it } from 'vitest';
import { parseKeyForm } from '../../src/dashboard/key-form.js';

// The dashboard's create-key form, checked without a server. The expected values are the form's
// documented rules: a label of at most 100 characters without control characters, an expiry from
// the page's list (never, 30, 90 or 365 days), at most 20 addresses and 20 origins, split on
// white space and commas.

const NOW = Date.UTC(2026, 0, 15, 12, 0, 0);
const DAY = 86_400_000;
const parse = (fields: Record<string, string>) => parseKeyForm(new URLSearchParams(fields), NOW);

describe('parseKeyForm', () => {
  it('an empty form is a key that never expires, with no label and no allow-lists', () => {
    expect(parse({})).toEqual({ expiresAt: null, allowedIps: [], allowedOrigins: [] });
    expect(parse({ label: '   ', expires: 'never', ips: '', origins: '' })).toEqual({ expiresAt: null, allowedIps: [], allowedOrigins: [] });
  });

  it('trims the label; 100 characters pass, 101 are refused', () => {
    expect(parse({ label: '  shop server  ' })).toMatchObject({ label: 'shop server' });
    expect(parse({ label: ` ${'a'.repeat(100)} ` })).toMatchObject({ label: 'a'.repeat(100) });
    expect(parse({ label: 'a'.repeat(101) })).toEqual({ error: 'The label is longer than 100 characters.' });
  });

  it('refuses control characters in the label (a tab, a DEL), not other letters', () => {
    expect(parse({ label: 'a\tb' })).toEqual({ error: 'The label has control characters.' });
    expect(parse({ label: 'a\u007fb' })).toEqual({ error: 'The label has control characters.' });
    expect(parse({ label: 'café – ü' })).toMatchObject({ label: 'café – ü' });
  });

  it('the expiry is one of the list, counted from now; anything else is refused', () => {
    expect(parse({ expires: '30d' })).toMatchObject({ expiresAt: new Date(NOW + 30 * DAY) });
    expect(parse({ expires: '90d' })).toMatchObject({ expiresAt: new Date(NOW + 90 * DAY) });
    expect(parse({ expires: '365d' })).toMatchObject({ expiresAt: new Date(NOW + 365 * DAY) });
    expect(parse({ expires: 'never' })).toMatchObject({ expiresAt: null });
    for (const expires of ['', '7d', 'forever', '30']) expect(parse({ expires })).toEqual({ error: 'Pick an expiry from the list.' });
  });

  it('splits addresses and origins on new lines, spaces and commas, dropping empty entries', () => {
    expect(parse({ ips: ' 192.0.2.7\r\n10.0.0.0/8, 2001:db8::/32\n\n', origins: 'https://a.example,https://b.example  https://c.example' })).toEqual({
      expiresAt: null,
      allowedIps: ['192.0.2.7', '10.0.0.0/8', '2001:db8::/32'],
      allowedOrigins: ['https://a.example', 'https://b.example', 'https://c.example'],
    });
  });

  it('takes 20 addresses and 20 origins; 21 of either are refused', () => {
    const ips = (n: number) => Array.from({ length: n }, (_, i) => `192.0.2.${i}`).join('\n');
    const origins = (n: number) => Array.from({ length: n }, (_, i) => `https://shop${i}.example`).join('\n');
    const both = parse({ ips: ips(20), origins: origins(20) });
    expect(both).toMatchObject({ allowedIps: expect.any(Array), allowedOrigins: expect.any(Array) });
    expect((both as { allowedIps: string[] }).allowedIps).toHaveLength(20);
    expect((both as { allowedOrigins: string[] }).allowedOrigins).toHaveLength(20);
    const error = { error: 'List at most 20 addresses and 20 origins.' };
    expect(parse({ ips: ips(21) })).toEqual(error);
    expect(parse({ origins: origins(21) })).toEqual(error);
  });

  it('names the first entry that is not an address or range, or not an origin', () => {
    expect(parse({ ips: '192.0.2.7\n10.0.0.0/99' })).toEqual({ error: '"10.0.0.0/99" is not an IP address or CIDR range (like 192.0.2.7, 10.0.0.0/8, 2001:db8::/32)' });
    expect(parse({ origins: 'https://shop.example https://shop.example/path ftp' })).toEqual({
      error: '"https://shop.example/path" is not an origin (such as https://shop.example, without a path).',
    });
  });
});
