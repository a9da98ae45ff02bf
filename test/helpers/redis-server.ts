import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { Redis } from 'ioredis';
import { captureOutput } from './log-capture.js';

export interface RedisServer {
  port: number;
  url: string;
  stop(): Promise<void>;
  /** Starts it again on the same port (after stop), empty. */
  restart(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

/**
 * A real redis-server on a free loopback port, without persistence. `.ci/run` installs it.
 * `debugCommand` allows `DEBUG SLEEP` from loopback (Redis 7 refuses DEBUG by default), to pause it.
 *
 * A free port found by probing can be taken before redis-server binds it (any outgoing connection
 * may get it as its source port): the server then exits, and whatever holds the port must not be
 * mistaken for it. So it is known ready only when the server that answers has the child's pid,
 * and a child that exits before that is started again on another port.
 */
export async function startRedis(
  options: {
    debugCommand?: boolean;
    /** More redis-server arguments (e.g. `--user` rules). */
    args?: string[];
    /** The user the readiness probe signs in as, when the default user is off. */
    probeAuth?: { username: string; password: string };
  } = {},
): Promise<RedisServer> {
  let port = 0;
  let child: ChildProcess | undefined;
  /** Starts redis-server on `port`; resolves false if it exited first (the port was taken). */
  const launchOn = async (): Promise<boolean> => {
    const started = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...(options.debugCommand ? ['--enable-debug-command', 'local'] : []), ...(options.args ?? [])], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child = started;
    // Redis's own log goes to the capture that the global teardown scans for keys.
    started.stdout!.on('data', (chunk: Buffer) => captureOutput(chunk.toString()));
    started.stderr!.on('data', (chunk: Buffer) => captureOutput(chunk.toString()));
    started.on('error', (error) => {
      throw new Error(`cannot start redis-server (is it installed?): ${error.message}`);
    });
    let exited = false;
    started.once('exit', () => (exited = true));
    for (let i = 0; i < 100 && !exited; i++) {
      const probe = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, ...options.probeAuth });
      probe.on('error', () => {}); // refused until the server is up: expected
      try {
        await probe.connect();
        const pid = /process_id:(\d+)/.exec(await probe.info('server'))?.[1];
        if (Number(pid) === started.pid) return true;
      } catch {
        // not up yet
      } finally {
        probe.disconnect();
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    if (!exited) throw new Error('redis-server did not start');
    return false;
  };
  const launch = async () => {
    if (!(await launchOn())) throw new Error(`redis-server could not bind port ${port} again`);
  };
  for (let attempt = 0; ; attempt++) {
    port = await freePort();
    if (await launchOn()) break;
    if (attempt === 4) throw new Error('redis-server exited before it answered, five times (ports taken?)');
  }
  const stop = () =>
    new Promise<void>((resolve) => {
      if (!child || child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGKILL');
    });
  return { port, url: `redis://127.0.0.1:${port}`, stop, restart: launch };
}

