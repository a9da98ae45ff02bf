import { Cluster, Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { connectRedis, parseRedisUrl } from '../src/core/index.js';

describe('connectRedis reads one server, a Cluster or Sentinels from the URL (docs/redis.md)', () => {
  it.each([
    ['redis://127.0.0.1:6380/2', { kind: 'single', tls: false, hosts: [{ host: '127.0.0.1', port: 6380 }], db: 2 }],
    ['rediss://bgcut:p%40ss@cache.example:6380', { kind: 'single', tls: true, username: 'bgcut', password: 'p@ss' }],
    ['redis://:secret@h', { kind: 'single', password: 'secret', username: undefined, hosts: [{ host: 'h', port: 6379 }] }],
    ['redis+cluster://a:7000,b:7001,[::1]:7002', { kind: 'cluster', hosts: [{ host: 'a', port: 7000 }, { host: 'b', port: 7001 }, { host: '::1', port: 7002 }] }],
    ['rediss+sentinel://u:p@s1:26379,s2/mymaster/3?sentinelPassword=sp', { kind: 'sentinel', tls: true, name: 'mymaster', db: 3, sentinelPassword: 'sp', hosts: [{ host: 's1', port: 26379 }, { host: 's2', port: 26379 }] }],
  ])('%s', (url, expected) => {
    expect(parseRedisUrl(url)).toMatchObject(expected);
  });

  it.each([
    ['http://h:6379', /Redis URL/],
    ['redis://a:1,b:2', /redis\+cluster/],
    ['redis+sentinel://s1:26379', /master name/],
    ['redis+cluster://a:1/2', /database 0/],
    ['redis://h/x', /not a number/],
  ])('refuses %s', (url, message) => {
    expect(() => parseRedisUrl(url)).toThrow(message);
  });

  it('builds a Cluster for redis+cluster://, a Sentinel client for redis+sentinel://, with the request-path settings on the nodes', () => {
    const cluster = connectRedis('redis+cluster://127.0.0.1:1,127.0.0.1:2', { lazyConnect: true, onStateChange: () => {} });
    const sentinel = connectRedis('redis+sentinel://127.0.0.1:3/main', { lazyConnect: true, onStateChange: () => {} });
    try {
      expect(cluster).toBeInstanceOf(Cluster);
      const clusterOptions = (cluster as Cluster).options;
      expect([clusterOptions.enableOfflineQueue, clusterOptions.retryDelayOnFailover]).toEqual([false, 0]);
      expect(clusterOptions.redisOptions).toMatchObject({ autoResendUnfulfilledCommands: false, commandTimeout: 1000 });
      expect(sentinel).toBeInstanceOf(Redis);
      expect((sentinel as Redis).options).toMatchObject({ name: 'main', sentinels: [{ host: '127.0.0.1', port: 3 }], enableOfflineQueue: false, autoResendUnfulfilledCommands: false });
    } finally {
      cluster.disconnect();
      sentinel.disconnect();
    }
  });
});
