import { afterAll, beforeAll } from 'vitest';
import { connectRedis, redisReady, type RedisClient } from '../../src/core/redis.js';
import { startRedisCluster } from './redis-cluster.js';
import { startRedis } from './redis-server.js';

/** A Redis deployment the shared stores must work on, started for a test file. */
export interface RedisTopology {
  name: string;
  start(): Promise<{ url: string; stop(): Promise<void> }>;
}

/** One server, and a three-master Redis Cluster: suites run `describe.each(redisTopologies)`. */
// BGCUT_TEST_REDIS_TOPOLOGY=server keeps the single server only: the mutation runs set it, since a
// Cluster started again for each mutant's rerun costs seconds and the stores run the same scripts on both.
export const redisTopologies: RedisTopology[] = [
  { name: 'one Redis server', start: () => startRedis() },
  { name: 'a Redis Cluster', start: () => startRedisCluster() },
].filter((topology) => process.env.BGCUT_TEST_REDIS_TOPOLOGY !== 'server' || topology.name === 'one Redis server');

/** Resolves once the client can take commands (a Cluster: its slots known, every master connected). */
export const ready = (client: RedisClient) => redisReady(client);

/**
 * The topology started for the tests of the enclosing describe block, with a client from
 * connectRedis: read `.redis`, `.url` and `.connect()` inside tests.
 */
export function useRedisTopology(topology: RedisTopology): { readonly redis: RedisClient; readonly url: string; connect(): Promise<RedisClient> } {
  let server: { url: string; stop(): Promise<void> } | undefined;
  let redis: RedisClient | undefined;
  const clients: RedisClient[] = [];
  const connect = async () => {
    const client = connectRedis(server!.url, { onStateChange: () => {} });
    clients.push(client);
    await ready(client);
    return client;
  };
  beforeAll(async () => {
    server = await topology.start();
    redis = await connect();
  }, 30_000);
  afterAll(async () => {
    for (const client of clients) client.disconnect();
    await server?.stop();
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('useRedisTopology: read it inside a test or hook, once Redis has started');
    return value;
  };
  return {
    get redis() {
      return started(redis);
    },
    get url() {
      return started(server).url;
    },
    connect,
  };
}
