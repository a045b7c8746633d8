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

/** The command connection: scripts, tallies, pings. */
export function createCommandClient(settings: RedisSettings): RedisClient {
  if (settings.clusterNodes) {
    const options: ClusterOptions = {
      enableOfflineQueue: false,
      enableAutoPipelining: true,
      redisOptions: baseOptions(settings),
      clusterRetryStrategy: (attempt) => Math.min(100 * 2 ** attempt, 2000),
      // MOVED/ASK retries must outlast a failover (cluster-node-timeout) only partly: past
      // that, failing fast with 503 is better than holding the request.
      retryDelayOnFailover: 200,
      maxRedirections: 16,
    };
    return new Cluster(settings.clusterNodes, options);
  }
  return new Redis(settings.url!, { ...baseOptions(settings), enableAutoPipelining: true });
}

/**
 * The subscriber connection: one per node, whatever the number of waiting recvs. In a
 * cluster, ioredis keeps one sharded subscriber per master behind it.
 */
export function createSubscriberClient(settings: RedisSettings): RedisClient {
  // No command timeout: a subscriber connection carries no request-reply traffic of ours
  // past the (S)SUBSCRIBE confirmations, and autoResubscribe restores it after reconnects.
  const options: RedisOptions = { ...baseOptions(settings), commandTimeout: undefined, autoResubscribe: true };
  if (settings.clusterNodes) {
    return new Cluster(settings.clusterNodes, {
      enableOfflineQueue: false,
      shardedSubscribers: true,
      redisOptions: options,
      clusterRetryStrategy: (attempt) => Math.min(100 * 2 ** attempt, 2000),
    });
  }
  return new Redis(settings.url!, options);
}
