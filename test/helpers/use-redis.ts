import type { Redis } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { connectRedis } from '../../src/core/index.js';
import { startRedis, type RedisServer } from './redis-server.js';

/**
 * A real redis-server and a client connected to it for the tests of the enclosing describe block
 * (or file): started before its first test, stopped after its last. Read `.redis` inside tests.
 */
export function useRedis(): { readonly redis: Redis; readonly server: RedisServer } {
  let server: RedisServer | undefined;
  let redis: Redis | undefined;
  beforeAll(async () => {
    server = await startRedis();
    redis = connectRedis(server.url, { onStateChange: () => {} }) as Redis; // a redis:// URL: one server
    await new Promise((r) => redis!.once('ready', r));
  });
  afterAll(async () => {
    redis?.disconnect();
    await server?.stop();
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('useRedis: read it inside a test or hook, once Redis has started');
    return value;
  };
  return {
    get redis() {
      return started(redis);
    },
    get server() {
      return started(server);
    },
  };
}
