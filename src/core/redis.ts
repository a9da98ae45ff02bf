import { Cluster, Redis, type ChainableCommander, type ClusterOptions, type RedisOptions } from 'ioredis';

/**
 * A Redis connection as bgcut takes it: one server or a Sentinel-managed one (`Redis`), or a Redis
 * Cluster (`Cluster`). Every store keeps the keys one script or MULTI touches under one hash tag,
 * so each works on a Cluster (see docs/redis.md).
 */
export type RedisClient = Redis | Cluster;

export interface ConnectRedisOptions extends RedisOptions {
  /** Longest a command may take before it fails, in ms. Default 1000. */
  commandTimeoutMs?: number;
  /** Told once when the connection is lost and once when it is back. Default: a line on stderr. */
  onStateChange?: (state: 'down' | 'up', error?: Error) => void;
  /** Options of the Cluster itself, for a `redis+cluster://` URL (its nodes take the options above). */
  cluster?: ClusterOptions;
}

/** The address forms `connectRedis` reads, parsed. */
export interface RedisAddress {
  kind: 'single' | 'cluster' | 'sentinel';
  tls: boolean;
  /** For `single`, one; for `cluster` the seed nodes; for `sentinel` the sentinels. */
  hosts: { host: string; port: number }[];
  username?: string | undefined;
  password?: string | undefined;
  db?: number | undefined;
  /** Sentinel: the monitored master's name. */
  name?: string | undefined;
  sentinelPassword?: string | undefined;
}

const DEFAULT_PORTS = { single: 6379, cluster: 6379, sentinel: 26379 };

/**
 * Reads a Redis address:
 * - `redis://[user:password@]host[:port][/db]`, `rediss://…` with TLS: one server;
 * - `redis+cluster://[user:password@]host:port,host:port,…` (`rediss+cluster://` with TLS): a
 *   Redis Cluster, from any of its nodes (the others are discovered);
 * - `redis+sentinel://[user:password@]host:port,host:port,…/master-name[/db][?sentinelPassword=…]`
 *   (`rediss+sentinel://`): the master that these Sentinels name, followed through failovers.
 * User and password are percent-encoded (an ACL user, Redis >= 6).
 */
export function parseRedisUrl(url: string): RedisAddress {
  const match = /^(rediss?)(?:\+(cluster|sentinel))?:\/\/(?:([^@/]*)@)?([^/?#]*)(\/[^?#]*)?(?:\?([^#]*))?$/.exec(url);
  if (!match) throw new RangeError('a Redis URL is redis[s]://host:port, redis[s]+cluster://host:port,… or redis[s]+sentinel://host:port,…/master');
  const [, scheme, variant, auth, hostList, path = '', query = ''] = match;
  const kind = (variant ?? 'single') as RedisAddress['kind'];
  const hosts = hostList!.split(',').filter(Boolean).map((entry) => {
    const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(entry);
    const [host, port] = bracketed ? [bracketed[1]!, bracketed[2]] : [entry.replace(/:\d+$/, ''), /:(\d+)$/.exec(entry)?.[1]];
    if (!host) throw new RangeError(`no host in Redis URL entry "${entry}"`);
    return { host, port: port ? Number(port) : DEFAULT_PORTS[kind] };
  });
  if (hosts.length === 0) throw new RangeError('a Redis URL needs a host');
  if (kind === 'single' && hosts.length > 1) throw new RangeError('several hosts need redis+cluster:// or redis+sentinel://');
  const [user, password] = auth ? ((i) => (i < 0 ? ['', auth] : [auth.slice(0, i), auth.slice(i + 1)]))(auth.indexOf(':')) : [undefined, undefined];
  const segments = path.split('/').filter(Boolean).map(decodeURIComponent);
  const name = kind === 'sentinel' ? segments.shift() : undefined;
  if (kind === 'sentinel' && !name) throw new RangeError('a redis+sentinel:// URL ends with /<master name>');
  const db = segments[0] !== undefined ? Number(segments[0]) : undefined;
  if (db !== undefined && !(Number.isInteger(db) && db >= 0)) throw new RangeError(`Redis database "${segments[0]}" is not a number`);
  if (kind === 'cluster' && db) throw new RangeError('a Redis Cluster has only database 0');
  const params = new URLSearchParams(query);
  return {
    kind,
    tls: scheme === 'rediss',
    hosts,
    username: user ? decodeURIComponent(user) : undefined,
    password: password ? decodeURIComponent(password) : undefined,
    db,
    name,
    sentinelPassword: params.get('sentinelPassword') ?? undefined,
  };
}

/**
 * An ioredis client set up for request paths: commands fail at once while disconnected
 * (no offline queue) and after `commandTimeoutMs` when Redis hangs, so a Redis outage turns into
 * a prompt 503 (or insurance limits), never a stuck request; it reconnects by itself, and never
 * resends a command that was not answered (see docs/limits.md). The URL picks one server, a
 * Sentinel-managed master or a Cluster (`parseRedisUrl`; docs/redis.md).
 */
export function connectRedis(url: string, options: ConnectRedisOptions = {}): RedisClient {
  const {
    commandTimeoutMs = 1000,
    onStateChange = (state: 'down' | 'up', error?: Error) =>
      console.error(state === 'down' ? `bgcut: redis unreachable (${error?.message ?? 'closed'})` : 'bgcut: redis reachable again'),
    cluster: clusterOptions,
    ...rest
  } = options;
  const address = parseRedisUrl(url);
  const auth = { ...(address.username ? { username: address.username } : {}), ...(address.password ? { password: address.password } : {}) };
  const nodeOptions: RedisOptions = {
    // A command whose reply was lost has already been answered for (a 503, an insurance charge, a
    // write kept to retry under its own op): sending it again after a reconnect could apply it twice.
    autoResendUnfulfilledCommands: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    commandTimeout: commandTimeoutMs,
    ...auth,
    ...(address.tls ? { tls: {} } : {}),
    ...rest,
  };
  let client: RedisClient;
  if (address.kind === 'cluster') {
    const { enableOfflineQueue, retryStrategy, lazyConnect, ...forNodes } = nodeOptions;
    client = new Cluster(address.hosts, {
      enableOfflineQueue: enableOfflineQueue ?? false,
      ...(lazyConnect ? { lazyConnect } : {}),
      // ioredis sends a command again when its node's connection closed before the reply: it may
      // have been applied, so that is the same double write as autoResendUnfulfilledCommands.
      retryDelayOnFailover: 0,
      clusterRetryStrategy: (attempt) => Math.min(attempt * 100, 2000),
      ...(address.tls ? { dnsLookup: (host, callback) => callback(null, host) } : {}),
      ...clusterOptions,
      redisOptions: { ...forNodes, ...(retryStrategy ? { retryStrategy } : {}), ...clusterOptions?.redisOptions },
    });
  } else if (address.kind === 'single') {
    // ioredis reads the URL itself (its query options too), as before clusters were known here.
    const { username: _u, password: _p, tls: _t, ...withoutAddress } = nodeOptions;
    client = new Redis(url, { enableOfflineQueue: false, retryStrategy: (attempt) => Math.min(attempt * 100, 2000), ...withoutAddress, ...pick(rest, ['username', 'password', 'tls']) });
  } else {
    client = new Redis({
      enableOfflineQueue: false,
      retryStrategy: (attempt) => Math.min(attempt * 100, 2000),
      ...{
            sentinels: address.hosts,
            name: address.name!,
            ...(address.sentinelPassword ? { sentinelPassword: address.sentinelPassword } : {}),
            ...(address.tls ? { enableTLSForSentinelMode: true, sentinelTLS: {} } : {}),
            // Sentinels answer for the master after a failover; reconnect to the new one at once.
            sentinelRetryStrategy: (attempt: number) => Math.min(attempt * 100, 2000),
          },
      ...(address.db ? { db: address.db } : {}),
      ...nodeOptions,
    });
  }
  if (client instanceof Cluster) {
    // The Cluster opens a node's connection on its first command, and without an offline queue it
    // refuses the commands that come while that connection is opening: open each node at once.
    client.on('+node', (node: Redis) => {
      if (node.status === 'wait') node.connect().catch(() => {});
    });
  }
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

function pick<T extends object>(from: T, names: (keyof T)[]): Partial<T> {
  return Object.fromEntries(names.filter((n) => from[n] !== undefined).map((n) => [n, from[n]])) as Partial<T>;
}

/**
 * Resolves once the client takes commands: connected, and for a Cluster, its slots known and a
 * connection open to every master (commands to a node still connecting fail without an offline
 * queue). Rejects after `timeoutMs` (default 10 s).
 */
export async function redisReady(client: RedisClient, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const isReady = () => client.status === 'ready' && (!(client instanceof Cluster) || client.nodes('master').every((node) => node.status === 'ready'));
  while (!isReady()) {
    if (client.status === 'end') throw new Error('the Redis client was closed');
    if (Date.now() > deadline) throw new Error(`Redis not ready in ${timeoutMs} ms (${client.status})`);
    if (client.status === 'wait') client.connect().catch(() => {});
    if (client instanceof Cluster) for (const node of client.nodes('master')) if (node.status === 'wait') node.connect().catch(() => {});
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The per-connection options of a client: a Cluster keeps them under `redisOptions`. */
export function nodeOptionsOf(redis: RedisClient): RedisOptions & { enableOfflineQueue?: boolean | undefined } {
  if (redis instanceof Cluster || 'redisOptions' in redis.options) {
    const options = redis.options as ClusterOptions;
    return { ...options.redisOptions, enableOfflineQueue: options.enableOfflineQueue };
  }
  return redis.options;
}

/**
 * The hash tag of an owner (`{a:acct_1}`): every key of one account, or of one Idempotency-Key,
 * carries its owner's tag, so the keys one script or MULTI touches sit in one Cluster slot.
 */
export function tag(kind: string, owner: string): string {
  return `{${kind}:${owner}}`;
}

/** A key prefix cannot hold a brace: its `{` would be taken for the start of the hash tag. */
export function checkKeyPrefix(prefix: string): string {
  if (/[{}]/.test(prefix)) throw new RangeError(`the Redis key prefix "${prefix}" cannot contain { or }`);
  return prefix;
}

/**
 * Whether an error means Redis could not be reached or did not answer in time (as opposed to an
 * answer that was an error): connection closed or refused, not writable, a command timeout, a
 * Cluster with no node or slot map, a master in failover.
 */
export function isUnreachable(error: unknown): boolean {
  const message = error instanceof Error ? error.message : String(error);
  return /Connection is closed|Stream isn't writeable|Command timed out|ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|connect ETIMEDOUT|None of startup nodes|Failed to refresh slots cache|Cluster is ended|Too many Cluster redirections|^CLUSTERDOWN|^MASTERDOWN|^LOADING|^TRYAGAIN|All sentinels are unreachable|Reached the max retries per request limit/.test(message)
    || (error as { name?: string })?.name === 'ClusterAllFailedError' || (error as { name?: string })?.name === 'MaxRetriesPerRequestError';
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
