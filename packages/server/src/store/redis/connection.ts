// Redis connections, configured on purpose: commands fail fast while Redis is unreachable
// (no offline queue, a command timeout) so that requests answer 503 instead of hanging,
// and the client reconnects by itself with a capped backoff.
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from "ioredis";

export interface RedisSettings {
  url?: string;
  clusterNodes?: { host: string; port: number }[];
  commandTimeoutMs: number;
}

export type RedisClient = Redis | Cluster;

const baseOptions = (settings: RedisSettings): RedisOptions => ({
  enableOfflineQueue: false,
  commandTimeout: settings.commandTimeoutMs,
  // A script that Redis may already have run must not be sent again behind our back:
  // the request fails instead, and the client's idempotency key makes its retry safe.
  autoResendUnfulfilledCommands: false,
  maxRetriesPerRequest: 0,
  retryStrategy: (attempt) => Math.min(50 * 2 ** attempt, 1000),
  connectTimeout: 5000,
  lazyConnect: false,
});

export interface RedisConnections {
  /** Scripts, tallies, pings. */
  commands: RedisClient;
  /** Wake-up subscriptions: one per node, whatever the number of waiting recvs. */
  subscriber: RedisClient;
}

/**
 * A node's Redis connections, constant whatever the number of waiting recvs. On one Redis:
 * a command connection and a subscriber connection. On a cluster: a command client (one
 * connection per master) and a subscribing client (its own connection per master, used
 * only for topology, plus one sharded subscriber per master): 3 per master.
 */
export function createRedisConnections(settings: RedisSettings): RedisConnections {
  // No command timeout on the subscriber: it carries no request-reply traffic past the
  // SSUBSCRIBE confirmations. A cluster's shard subscribers are restored by ioredis's
  // subscriber group; a single Redis's by RedisWakeupBus (below).
  const subscriberOptions: RedisOptions = { ...baseOptions(settings), commandTimeout: undefined, autoResubscribe: true };
  if (settings.clusterNodes) {
    const commands = new Cluster(settings.clusterNodes, {
      enableOfflineQueue: false,
      enableAutoPipelining: true,
      redisOptions: baseOptions(settings),
      clusterRetryStrategy: (attempt) => Math.min(100 * 2 ** attempt, 2000),
      // MOVED/ASK retries cover a slot migration; past that, failing fast with 503 is
      // better than holding the request through a whole failover.
      retryDelayOnFailover: 200,
      maxRedirections: 16,
    });
    // A client of its own: sharded subscriptions on the command client lost wake-ups in
    // our cross-node race test (ioredis 6.0.0); on a separate client none were lost.
    const subscriber = new Cluster(settings.clusterNodes, {
      enableOfflineQueue: false,
      shardedSubscribers: true,
      redisOptions: subscriberOptions,
      clusterRetryStrategy: (attempt) => Math.min(100 * 2 ** attempt, 2000),
    });
    return { commands, subscriber };
  }
  const commands = new Redis(settings.url!, { ...baseOptions(settings), enableAutoPipelining: true });
  // On one Redis the wake-up bus restores its own subscriptions after a reconnect:
  // ioredis's autoResubscribe sends them without handling their promises, and a connection
  // lost again before they are confirmed rejects them unhandled, which ends the process.
  const subscriber = new Redis(settings.url!, { ...subscriberOptions, autoResubscribe: false });
  return { commands, subscriber };
}
