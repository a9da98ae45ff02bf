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
 */
export async function startRedis(options: { debugCommand?: boolean } = {}): Promise<RedisServer> {
  const port = await freePort();
  let child: ChildProcess | undefined;
  const launch = async () => {
    child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...(options.debugCommand ? ['--enable-debug-command', 'local'] : [])], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    // Redis's own log goes to the capture that the global teardown scans for keys.
    child.stdout!.on('data', (chunk: Buffer) => captureOutput(chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => captureOutput(chunk.toString()));
    child.on('error', (error) => {
      throw new Error(`cannot start redis-server (is it installed?): ${error.message}`);
    });
    const probe = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    probe.on('error', () => {}); // refused until the server is up: expected
    for (let i = 0; i < 100; i++) {
      try {
        await probe.connect();
        await probe.ping();
        probe.disconnect();
        return;
      } catch {
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    throw new Error('redis-server did not start');
  };
  const stop = () =>
    new Promise<void>((resolve) => {
      if (!child || child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGKILL');
    });
  await launch();
  return { port, url: `redis://127.0.0.1:${port}`, stop, restart: launch };
}

