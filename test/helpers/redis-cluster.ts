import { execFile, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { ask, freePorts, killAll, spawnRedis, until } from './redis-processes.js';

const run = promisify(execFile);

export interface RedisClusterServer {
  /** The masters' ports (with replicas: every node's, masters first as `redis-cli --cluster create` assigns them). */
  ports: number[];
  /** `redis+cluster://127.0.0.1:P1,…` for connectRedis. */
  url: string;
  /** The redis-server process of master `index` (to pause or kill it). */
  process(index: number): ChildProcess;
  /** The redis-server process listening on `port`. */
  processOnPort(port: number): ChildProcess | undefined;
  stop(): Promise<void>;
}

const wait = (what: string, check: () => Promise<boolean>, timeoutMs = 15_000) => until(`redis cluster: ${what}`, check, timeoutMs, 50);

/**
 * A real Redis Cluster of `masters` (default 3) redis-servers on free loopback ports (client and
 * cluster-bus ports both probed), without persistence, joined by `redis-cli --cluster create`,
 * with `replicas` (default 0) replicas per master, which take over when their master dies.
 * Takes a second or two. Each node's files live in a temporary folder removed by stop().
 */
export async function startRedisCluster(options: { masters?: number; replicas?: number } = {}): Promise<RedisClusterServer> {
  const masters = options.masters ?? 3;
  const replicas = options.replicas ?? 0;
  const nodes = masters * (1 + replicas);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-redis-cluster-'));
  const allPorts = await freePorts(nodes * 2);
  const ports = allPorts.slice(0, nodes);
  const busPorts = allPorts.slice(nodes);
  const children = ports.map((port, i) =>
    spawnRedis(['--port', String(port), '--cluster-port', String(busPorts[i]), '--bind', '127.0.0.1', '--cluster-enabled', 'yes', '--cluster-config-file', path.join(dir, `nodes-${port}.conf`),
      '--cluster-node-timeout', '2000', '--save', '', '--appendonly', 'no', '--dir', dir, '--enable-debug-command', 'local']),
  );
  const stop = async () => {
    await killAll(children);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await Promise.all(ports.map((port) => wait(`redis-server on ${port}`, () => ask(port, async (c) => (await c.ping()) === 'PONG'))));
    await run('redis-cli', ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', String(replicas), '--cluster-yes']);
    // Every node must agree the cluster is up (all slots served) before a client is told its slots.
    await Promise.all(
      ports.map((port) =>
        wait(`cluster_state:ok on ${port}`, () => ask(port, async (c) => /cluster_state:ok/.test(String(await c.call('CLUSTER', 'INFO'))))),
      ),
    );
    // A replica takes over only once it has synced with its primary (otherwise its data is too old to be promoted).
    if (replicas > 0) {
      await Promise.all(
        ports.map((port) =>
          wait(`replication settled on ${port}`, () =>
            ask(port, async (c) => {
              const info = String(await c.info('replication'));
              return /role:master/.test(info) ? new RegExp(`connected_slaves:${replicas}\\b`).test(info) : /master_link_status:up/.test(info);
            }), 30_000),
        ),
      );
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return { ports, url: `redis+cluster://${ports.map((p) => `127.0.0.1:${p}`).join(',')}`, process: (i) => children[i]!, processOnPort: (port) => children[ports.indexOf(port)], stop };
}
