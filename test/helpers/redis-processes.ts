import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { Redis } from 'ioredis';
import { captureOutput } from './log-capture.js';

/** Free loopback ports, all held open until every one is found (no two alike). */
export async function freePorts(count: number): Promise<number[]> {
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

/** Resolves once `check` resolves true (a throw counts as not yet), polled every `intervalMs`; rejects after `timeoutMs` naming `what`. */
export async function until(what: string, check: () => Promise<boolean>, timeoutMs: number, intervalMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(`${what} did not happen in ${timeoutMs} ms`);
}

/** A redis-server (or Sentinel) with `args`, its output to the capture the global teardown scans for keys. */
export function spawnRedis(args: string[]): ChildProcess {
  const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (chunk: Buffer) => captureOutput(chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => captureOutput(chunk.toString()));
  child.on('error', (error) => captureOutput(`cannot start redis-server (is it installed?): ${error.message}\n`));
  return child;
}

/** SIGKILLs each process still running and resolves once all have exited. */
export async function killAll(children: Iterable<ChildProcess>): Promise<void> {
  await Promise.all(
    [...children].map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          child.once('exit', () => resolve());
          child.kill('SIGKILL');
        }),
    ),
  );
}

/** `run` on a fresh, non-retrying connection to the node on `port`, closed afterwards. */
export async function ask<T>(port: number, run: (client: Redis) => Promise<T>): Promise<T> {
  const client = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => {}); // refused until the server is up: expected
  try {
    await client.connect();
    return await run(client);
  } finally {
    client.disconnect();
  }
}
