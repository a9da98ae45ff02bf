import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ask, freePorts, killAll, spawnRedis, until } from './redis-processes.js';

export interface RedisSentinelSet {
  /** `redis+sentinel://127.0.0.1:S1,…/bgcut` for connectRedis. */
  url: string;
  masterName: string;
  /** The port of the primary now (it changes after a failover). */
  masterPort(): Promise<number>;
  /** SIGKILLs the redis-server listening on `port`. */
  kill(port: number): void;
  stop(): Promise<void>;
}

const wait = (what: string, check: () => Promise<boolean>, timeoutMs = 20_000) => until(`redis sentinel: ${what}`, check, timeoutMs, 100);

/**
 * A primary, one replica and three Sentinels (quorum 2, primary down after 1 s), on free loopback
 * ports, without persistence. A few seconds to start (the Sentinels must see the replica).
 */
export async function startRedisSentinels(): Promise<RedisSentinelSet> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'bgcut-redis-sentinel-'));
  const [primary, replica, ...sentinels] = await freePorts(5);
  const masterName = 'bgcut';
  const children = new Map<number, ChildProcess>();
  const launch = (port: number, args: string[]) => children.set(port, spawnRedis(args));
  const common = ['--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir];
  launch(primary!, ['--port', String(primary), ...common]);
  launch(replica!, ['--port', String(replica), '--replicaof', '127.0.0.1', String(primary), ...common]);
  for (const port of sentinels) {
    const conf = path.join(dir, `sentinel-${port}.conf`);
    await writeFile(
      conf,
      [
        `port ${port}`,
        'bind 127.0.0.1',
        `dir ${dir}`,
        `sentinel monitor ${masterName} 127.0.0.1 ${primary} 2`,
        `sentinel down-after-milliseconds ${masterName} 1000`,
        `sentinel failover-timeout ${masterName} 10000`,
        `sentinel parallel-syncs ${masterName} 1`,
        '',
      ].join('\n'),
    );
    launch(port, [conf, '--sentinel']);
  }
  const stop = async () => {
    await killAll(children.values());
    await rm(dir, { recursive: true, force: true });
  };
  try {
    // The replica in sync, and every Sentinel knowing the replica and the other Sentinels.
    await wait('replica in sync', () => ask(replica!, async (c) => /master_link_status:up/.test(await c.info('replication'))));
    for (const port of sentinels) {
      await wait(`sentinel ${port} ready`, () =>
        ask(port, async (c) => {
          const master = (await c.call('SENTINEL', 'MASTER', masterName)) as string[];
          const field = (name: string) => Number(master[master.indexOf(name) + 1]);
          return field('num-slaves') >= 1 && field('num-other-sentinels') >= 2;
        }),
      );
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    url: `redis+sentinel://${sentinels.map((p) => `127.0.0.1:${p}`).join(',')}/${masterName}`,
    masterName,
    masterPort: () => ask(sentinels[0]!, async (c) => Number(((await c.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', masterName)) as string[])[1])),
    kill: (port) => children.get(port)?.kill('SIGKILL'),
    stop,
  };
}
