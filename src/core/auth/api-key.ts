import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { crc32 } from 'node:zlib';

/**
 * API key format: `bgk_` + 22 base62 characters of randomness (16 bytes, 128 bits) + 6 base62
 * characters of CRC-32 over the random part. The checksum lets a mistyped or made-up key be
 * refused as malformed without a store lookup; the prefix makes leaked keys easy to scan for.
 */
export const API_KEY_PREFIX = 'bgk_';
const RANDOM_CHARS = 22;
const CHECKSUM_CHARS = 6;
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const KEY_PATTERN = new RegExp(`^${API_KEY_PREFIX}[0-9A-Za-z]{${RANDOM_CHARS + CHECKSUM_CHARS}}$`);

function base62(value: bigint, width: number): string {
  let out = '';
  for (let i = 0; i < width; i++) {
    out = ALPHABET[Number(value % 62n)]! + out;
    value /= 62n;
  }
  return out;
}

function checksumOf(randomPart: string): string {
  return base62(BigInt(crc32(randomPart)), CHECKSUM_CHARS);
}

export function generateApiKey(): string {
  const random = base62(BigInt(`0x${randomBytes(16).toString('hex')}`), RANDOM_CHARS);
  return `${API_KEY_PREFIX}${random}${checksumOf(random)}`;
}

/** True when `key` has the prefix, the length, the alphabet and a matching checksum. */
export function isWellFormedApiKey(key: string): boolean {
  if (!KEY_PATTERN.test(key)) return false;
  const random = key.slice(API_KEY_PREFIX.length, API_KEY_PREFIX.length + RANDOM_CHARS);
  return key.slice(API_KEY_PREFIX.length + RANDOM_CHARS) === checksumOf(random);
}

/**
 * Only this hash of a key is ever stored. A plain SHA-256 suffices: keys carry 128 random bits,
 * so there is nothing for a slow password hash to protect against.
 */
export function hashApiKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

/** A short id derived from the hash: safe to log and show, useless for authenticating. */
export function keyIdOf(hash: string): string {
  return `key_${hash.slice(0, 12)}`;
}

/** Constant-time comparison of two hex hashes of equal length. */
export function hashesEqual(a: string, b: string): boolean {
  const left = Buffer.from(a, 'hex');
  const right = Buffer.from(b, 'hex');
  return left.length === right.length && timingSafeEqual(left, right);
}
