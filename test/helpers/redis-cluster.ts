import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { captureOutput } from './log-capture.js';

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

/** Free loopback ports, all held open until every one is found (no two alike). */
async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<net.Server>((resolve, reject) => {
          const server = net.createServer();
          server.listen(0, '127.0.0.1', () => resolve(server));
          server.on('error', reject);
        }),
    ),
  );
  const ports = servers.map((s) => (s.address() as net.AddressInfo).port);
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  return ports;
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`redis cluster: ${what} did not happen in ${timeoutMs} ms`);
}

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
  const children = ports.map((port, i) => {
    const child = spawn(
      'redis-server',
      ['--port', String(port), '--cluster-port', String(busPorts[i]), '--bind', '127.0.0.1', '--cluster-enabled', 'yes', '--cluster-config-file', path.join(dir, `nodes-${port}.conf`),
        '--cluster-node-timeout', '2000', '--save', '', '--appendonly', 'no', '--dir', dir, '--enable-debug-command', 'local'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    child.stdout!.on('data', (chunk: Buffer) => captureOutput(chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => captureOutput(chunk.toString()));
    child.on('error', (error) => captureOutput(`cannot start redis-server (is it installed?): ${error.message}\n`));
    return child;
  });
  const stop = async () => {
    await Promise.all(
      children.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            child.once('exit', () => resolve());
            child.kill('SIGKILL');
          }),
      ),
    );
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const ping = async (port: number) => {
      const probe = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      probe.on('error', () => {});
      try {
        await probe.connect();
        return probe;
      } catch (error) {
        probe.disconnect();
        throw error;
      }
    };
    await Promise.all(ports.map((port) => until(`redis-server on ${port}`, async () => ((await ping(port)).disconnect(), true))));
    await run('redis-cli', ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', String(replicas), '--cluster-yes']);
    // Every node must agree the cluster is up (all slots served) before a client is told its slots.
    await Promise.all(
      ports.map((port) =>
        until(`cluster_state:ok on ${port}`, async () => {
          const probe = await ping(port);
          try {
            return /cluster_state:ok/.test(String(await probe.call('CLUSTER', 'INFO')));
          } finally {
            probe.disconnect();
          }
        }),
      ),
    );
    // A replica takes over only once it has synced with its primary (otherwise its data is too old to be promoted).
    if (replicas > 0) {
      await Promise.all(
        ports.map((port) =>
          until(`replication settled on ${port}`, async () => {
            const probe = await ping(port);
            try {
              const info = String(await probe.info('replication'));
              return /role:master/.test(info) ? new RegExp(`connected_slaves:${replicas}\\b`).test(info) : /master_link_status:up/.test(info);
            } finally {
              probe.disconnect();
            }
          }, 30_000),
        ),
      );
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return { ports, url: `redis+cluster://${ports.map((p) => `127.0.0.1:${p}`).join(',')}`, process: (i) => children[i]!, processOnPort: (port) => children[ports.indexOf(port)], stop };
}
