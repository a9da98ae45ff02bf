import type { ConnectionOptions } from 'bullmq';

/** BullMQ's default key prefix here: a hash tag, so every key of a queue lands in one Redis Cluster slot. */
export const DEFAULT_BULLMQ_PREFIX = '{bgcut}';

/**
 * The prefix to give BullMQ: `{bgcut}` unless told otherwise. BullMQ's scripts touch several
 * keys of a queue at once, which a Redis Cluster allows only within one slot: on a Cluster
 * connection a prefix without a hash tag (`{...}`) is refused here, at construction, rather
 * than by every script with CROSSSLOT.
 */
export function bullmqPrefix(connection: ConnectionOptions, prefix = DEFAULT_BULLMQ_PREFIX): string {
  const cluster = (connection as { isCluster?: boolean }).isCluster === true;
  if (cluster && !/\{[^}]+\}/.test(prefix)) throw new RangeError(`BullMQ on a Redis Cluster needs a hash-tagged prefix such as "{bgcut}", got "${prefix}"`);
  return prefix;
}
