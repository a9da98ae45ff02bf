import { Redis, type ChainableCommander, type RedisOptions } from 'ioredis';

export interface ConnectRedisOptions extends RedisOptions {
  /** Longest a command may take before it fails, in ms. Default 1000. */
  commandTimeoutMs?: number;
  /** Told once when the connection is lost and once when it is back. Default: a line on stderr. */
  onStateChange?: (state: 'down' | 'up', error?: Error) => void;
}

/**
 * An ioredis client set up for request paths: commands fail at once while disconnected
 * (no offline queue) and after `commandTimeoutMs` when Redis hangs, so a Redis outage turns into
 * a prompt 503 (or insurance limits), never a stuck request; it reconnects by itself, and never
 * resends a command that was not answered (see docs/limits.md).
 */
export function connectRedis(url: string, options: ConnectRedisOptions = {}): Redis {
  const {
    commandTimeoutMs = 1000,
    onStateChange = (state: 'down' | 'up', error?: Error) =>
      console.error(state === 'down' ? `bgcut: redis unreachable (${error?.message ?? 'closed'})` : 'bgcut: redis reachable again'),
    ...rest
  } = options;
  const client = new Redis(url, {
    enableOfflineQueue: false,
    // A command whose reply was lost has already been answered for (a 503, an insurance charge, a
    // write kept to retry under its own op): sending it again after a reconnect could apply it twice.
    autoResendUnfulfilledCommands: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    commandTimeout: commandTimeoutMs,
    retryStrategy: (attempt) => Math.min(attempt * 100, 2000),
    ...rest,
  });
  // ioredis emits an error on every failed reconnect; report state changes, not each attempt.
  let down = false;
  client.on('error', (error: Error) => {
    if (down) return;
    down = true;
    onStateChange('down', error);
  });
  client.on('ready', () => {
    if (!down) return;
    down = false;
    onStateChange('up');
  });
  return client;
}

/**
 * Runs a MULTI and fails with the first command's error, if any. ioredis resolves `exec()` with
 * one [error, result] pair per command, so a command Redis refused (WRONGTYPE, say) would
 * otherwise pass unnoticed while the others were applied.
 */
export async function execAll(multi: ChainableCommander): Promise<unknown[]> {
  const results = await multi.exec();
  if (!results) throw new Error('Redis aborted the transaction');
  for (const [error] of results) if (error) throw error;
  return results.map(([, value]) => value);
}
