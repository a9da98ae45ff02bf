import { describe, expect, it } from 'vitest';
import { API_KEY_PREFIX, generateApiKey, hashApiKey, hashesEqual, isWellFormedApiKey, keyIdOf } from '../src/core/auth/api-key.js';
import { extractApiKey } from '../src/core/auth/authenticate.js';
import { ApiError } from '../src/core/errors.js';

describe('API key format', () => {
  it('generates distinct, well-formed keys with the prefix', () => {
    const keys = new Set(Array.from({ length: 200 }, generateApiKey));
    expect(keys.size).toBe(200);
    for (const key of keys) {
      expect(key.startsWith(API_KEY_PREFIX)).toBe(true);
      expect(key).toHaveLength(32);
      expect(isWellFormedApiKey(key)).toBe(true);
    }
  });

  it('catches any single changed character through the checksum', () => {
    const key = generateApiKey();
    for (let i = API_KEY_PREFIX.length; i < key.length; i++) {
      const swapped = key[i] === 'a' ? 'b' : 'a';
      expect(isWellFormedApiKey(key.slice(0, i) + swapped + key.slice(i + 1))).toBe(false);
    }
  });

  it('refuses other shapes', () => {
    for (const bad of ['', 'bgk_', 'sk_live_abc', `${generateApiKey()}x`, ` ${generateApiKey()}`, generateApiKey().replace('bgk_', 'bgx_')]) {
      expect(isWellFormedApiKey(bad)).toBe(false);
    }
  });

  it('derives a loggable id from the hash, never from the key', () => {
    const key = generateApiKey();
    const id = keyIdOf(hashApiKey(key));
    expect(id).toMatch(/^key_[0-9a-f]{12}$/);
    expect(key).not.toContain(id.slice(4));
  });
});

describe('hashesEqual', () => {
  it('equal hashes only; hashes of different lengths are unequal (not an error)', () => {
    const a = hashApiKey(generateApiKey());
    const b = hashApiKey(generateApiKey());
    expect(hashesEqual(a, a)).toBe(true);
    expect(hashesEqual(a, b)).toBe(false);
    expect(hashesEqual(a, a.slice(0, 32))).toBe(false);
    expect(hashesEqual(a.slice(0, 32), a)).toBe(false);
  });
});

describe('finding the key in a request', () => {
  const code = (headers: Record<string, string | string[]>, url = '/v1/remove-bg') => {
    try {
      extractApiKey(headers, url);
      return 'ok';
    } catch (error) {
      return (error as ApiError).code;
    }
  };
  const key = generateApiKey();

  it('takes X-API-KEY', () => expect(code({ 'x-api-key': key })).toBe('ok'));
  it('refuses two X-API-KEY headers', () => {
    expect(code({ 'x-api-key': `${key}, ${key}` })).toBe('multiple_api_keys');
    expect(code({ 'x-api-key': [key, key] })).toBe('multiple_api_keys');
  });
  it('names the mistake when the key is elsewhere', () => {
    expect(code({ authorization: `Bearer ${key}` })).toBe('api_key_wrong_header');
    expect(code({ 'x-api-token': key })).toBe('api_key_wrong_header');
    expect(code({}, `/v1/remove-bg?api_key=${key}`)).toBe('api_key_wrong_header');
  });
  it('says missing when there is nothing', () => expect(code({})).toBe('missing_api_key'));

  // The places docs/security.md lists as a key in the wrong place.
  it.each(['authorization', 'x-api-token', 'api-key', 'apikey', 'x-apikey', 'x-auth-token', 'x-access-token'])('a key in the %s header: api_key_wrong_header', (header) => {
    expect(code({ [header]: key })).toBe('api_key_wrong_header');
  });
  it.each(['api_key', 'apikey', 'apiKey', 'key', 'token', 'access_token', 'x-api-key'])('a key in the %s query parameter: api_key_wrong_header', (param) => {
    expect(code({}, `/v1/remove-bg?format=png&${param}=${key}`)).toBe('api_key_wrong_header');
  });
  it('other headers and query parameters are no key at all: missing_api_key', () => {
    expect(code({ 'content-type': 'image/png', 'x-request-id': key }, '/v1/remove-bg?format=png&size=auto')).toBe('missing_api_key');
  });
  it('an empty X-API-KEY is a missing key; a mistyped one is malformed', () => {
    expect(code({ 'x-api-key': '' })).toBe('missing_api_key');
    expect(code({ 'x-api-key': key.slice(0, -1) })).toBe('malformed_api_key');
  });
  it('every 401 names the header to use (WWW-Authenticate)', () => {
    for (const headers of [{}, { authorization: key }, { 'x-api-key': `${key},${key}` }, { 'x-api-key': 'bgk_nope' }]) {
      try {
        extractApiKey(headers, '/');
        expect.unreachable();
      } catch (error) {
        expect([(error as ApiError).status, (error as ApiError).headers]).toEqual([401, { 'www-authenticate': 'ApiKey realm="bgcut", header="X-API-KEY"' }]);
      }
    }
  });
});
