import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

/** scrypt's three parameters: CPU/memory cost N (a power of two), block size r, parallelism p. */
export interface ScryptCost {
  N: number;
  r: number;
  p: number;
}

/**
 * The default cost: N = 2^15, r = 8, p = 3. OWASP's Password Storage Cheat Sheet lists it as
 * one of five equivalent minimums (N=2^17/r=8/p=1, 2^16/8/2, 2^15/8/3, 2^14/8/5, 2^13/8/10).
 * Of those it was picked for its memory: 32 MiB per check (128 * N * r), so the four checks
 * libuv runs at once hold 128 MiB, where N = 2^17 would hold 512 MiB in the process that also
 * serves the API. The work is three quarters of 2^17's (Node runs the p lanes one after another).
 */
export const DEFAULT_SCRYPT_COST: Readonly<ScryptCost> = Object.freeze({ N: 2 ** 15, r: 8, p: 3 });

const KEY_BYTES = 32;
export const MIN_PASSWORD_LENGTH = 10;
export const MAX_PASSWORD_LENGTH = 256;

/** What a check found: whether the password matches, and whether its hash should be redone at today's cost. */
export interface PasswordCheck {
  valid: boolean;
  /** The stored hash was made with another cost than this hasher's: hash the password again. */
  needsRehash: boolean;
}

function derive(password: string, salt: Buffer, cost: ScryptCost): Promise<Buffer> {
  const options: ScryptOptions = { ...cost, maxmem: 256 * cost.N * cost.r };
  return new Promise((resolve, reject) => scrypt(password.normalize('NFKC'), salt, KEY_BYTES, options, (error, key) => (error ? reject(error) : resolve(key))));
}

/** Why a new password is not acceptable, or undefined when it is. */
export function passwordProblem(password: string): string | undefined {
  if (password.length < MIN_PASSWORD_LENGTH) return `Use at least ${MIN_PASSWORD_LENGTH} characters.`;
  if (password.length > MAX_PASSWORD_LENGTH) return `Use at most ${MAX_PASSWORD_LENGTH} characters.`;
  return undefined;
}

/**
 * Password hashes with scrypt from node:crypto and a random 16-byte salt per holder, stored as
 * `scrypt$N$r$p$salt$hash` (base64url): every hash records its own cost, so hashes made at an
 * older cost still verify, and `needsRehash` tells the sign-in to store a new one.
 */
export class PasswordHasher {
  readonly cost: Readonly<ScryptCost>;
  /** A hash of nothing, checked when the email is unknown so the answer takes as long either way. */
  private decoy: Promise<string> | undefined;

  constructor(cost: ScryptCost = DEFAULT_SCRYPT_COST) {
    const { N, r, p } = cost;
    if (!Number.isInteger(Math.log2(N)) || N < 2 || !Number.isInteger(r) || r < 1 || !Number.isInteger(p) || p < 1) {
      throw new RangeError(`scrypt cost: N must be a power of two, r and p positive integers (got N=${N}, r=${r}, p=${p})`);
    }
    this.cost = Object.freeze({ N, r, p });
  }

  async hash(password: string): Promise<string> {
    const salt = randomBytes(16);
    const hash = await derive(password, salt, this.cost);
    return ['scrypt', this.cost.N, this.cost.r, this.cost.p, salt.toString('base64url'), hash.toString('base64url')].join('$');
  }

  /** Checks `password` against `stored`; with no stored hash (unknown email) it checks a decoy and answers invalid. */
  async verify(password: string, stored: string | undefined): Promise<PasswordCheck> {
    const invalid = { valid: false, needsRehash: false };
    if (password.length > MAX_PASSWORD_LENGTH) return invalid;
    const parts = (stored ?? (await (this.decoy ??= this.hash(randomBytes(16).toString('hex'))))).split('$');
    if (parts.length !== 6 || parts[0] !== 'scrypt') return invalid;
    const [N, r, p] = parts.slice(1, 4).map(Number) as [number, number, number];
    if (![N, r, p].every((v) => Number.isInteger(v) && v > 0) || N > 2 ** 20 || r > 32 || p > 16) return invalid;
    const expected = Buffer.from(parts[5]!, 'base64url');
    const actual = await derive(password, Buffer.from(parts[4]!, 'base64url'), { N, r, p });
    const valid = stored !== undefined && expected.length === actual.length && timingSafeEqual(expected, actual);
    return { valid, needsRehash: valid && (N !== this.cost.N || r !== this.cost.r || p !== this.cost.p) };
  }
}

const defaultHasher = new PasswordHasher();

/** A hash at the default cost. */
export function hashPassword(password: string): Promise<string> {
  return defaultHasher.hash(password);
}

/** Whether `password` matches `stored` (whatever cost `stored` was made with). */
export async function verifyPassword(password: string, stored: string | undefined): Promise<boolean> {
  return (await defaultHasher.verify(password, stored)).valid;
}
