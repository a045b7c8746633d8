// Redis connections, configured on purpose: commands fail fast while Redis is unreachable
// (no offline queue, a command timeout) so that requests answer 503 instead of hanging,
// and the client reconnects by itself with a capped backoff. Three ways to reach the store:
// one Redis (a URL), a Redis Cluster (seed nodes), or a master found through Sentinel.
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from "ioredis";
import type { RedisConfig } from "../../config.js";

export type RedisSettings = Pick<
  RedisConfig,
  "url" | "clusterNodes" | "sentinel" | "username" | "password" | "tls" | "commandTimeoutMs"
> & {
  /** A connection of its own for writes that WAIT for replicas (see write-ack.ts). */
  writeAckReplicas?: number | "all";
};

export type RedisClient = Redis | Cluster;

const baseOptions = (settings: RedisSettings): RedisOptions => ({
  enableOfflineQueue: false,
  commandTimeout: settings.commandTimeoutMs,
  // A script that Redis may already have run must not be sent again behind our back:
  // the request fails instead, and the client's idempotency key makes its retry safe.
  // (It also keeps a WAIT from being resent alone on a new connection, where it would
  // confirm at once a write that may be gone.)
  autoResendUnfulfilledCommands: false,
  maxRetriesPerRequest: 0,
  retryStrategy: (attempt) => Math.min(50 * 2 ** attempt, 1000),
  connectTimeout: 5000,
  // Dropping a connection (on +switch-master, READONLY, or a missed heartbeat) ends it
  // politely and waits this long for the server's side to close before destroying it. A
  // hung master never closes its side, so the default 2 s was 2 s more on every such
  // failover (measured with DEBUG SLEEP); a live server closes its side in well under 1 ms.
  disconnectTimeout: 200,
  lazyConnect: false,
  // A master demoted under us (Sentinel failover, a replica promoted by hand) answers
  // writes with READONLY while the connection stays open: reconnect, which asks Sentinel
  // for the master again. The failed command is not resent (1, not 2): it answers 503.
  reconnectOnError: (error) => (/^READONLY\b/.test(error.message) ? 1 : false),
  ...(settings.url
    ? {}
    : { username: settings.username, password: settings.password, tls: settings.tls ? {} : undefined }),
});

/**
 * The write-ack connection: no command timeout of its own. The store's operation timeout
 * answers the caller in time; the pipeline itself stays counted until Redis answers it, so
 * that the write-ack path knows how many changes are really queued on the connection (see
 * WriteAcknowledger.change). A connection to a master that stopped answering is dropped
 * with the command connection (the heartbeat).
 */
const ackedOptions = (settings: RedisSettings): RedisOptions => ({
  ...baseOptions(settings),
  commandTimeout: undefined,
});

/** Options that make a Redis client find its master through Sentinel. */
const sentinelOptions = (settings: RedisSettings): RedisOptions => {
  const sentinel = settings.sentinel!;
  return {
    sentinels: sentinel.sentinels,
    name: sentinel.name,
    role: "master",
    sentinelUsername: sentinel.username,
    sentinelPassword: sentinel.password,
    sentinelTLS: sentinel.tls ? {} : undefined,
    // TLS to the data nodes too (ioredis applies `tls` to them only with this on).
    enableTLSForSentinelMode: settings.tls,
    natMap: sentinel.natMap,
    // Without the detector ioredis only learns of a failover when its connection breaks,
    // which a hung master (SIGSTOP, a partition) never does: it subscribes to
    // +switch-master on the sentinels and reconnects when the master changes.
    failoverDetector: true,
    updateSentinels: true,
    // A sentinel that hangs must not hold up finding the master.
    sentinelCommandTimeout: settings.commandTimeoutMs,
    sentinelRetryStrategy: (attempt) => Math.min(100 * attempt, 1000),
  };
};

export interface RedisConnections {
  /** Scripts, tallies, pings. */
  commands: RedisClient;
  /** Wake-up subscriptions: one per node, whatever the number of waiting recvs. */
  subscriber: RedisClient;
  /**
   * With write-ack on: the connection state changes go through as [script, WAIT]
   * pipelines, so that a WAIT blocked on absent replicas never holds up the reads queued
   * behind it on the command connection.
   */
  acked?: RedisClient;
  /** Stops the connections' heartbeats (see keepAlive). */
  stop(): void;
}

function clusterCommandOptions(settings: RedisSettings): ClusterOptions {
  return {
    enableOfflineQueue: false,
    enableAutoPipelining: true,
    redisOptions: baseOptions(settings),
    clusterRetryStrategy: (attempt) => Math.min(100 * 2 ** attempt, 2000),
    // MOVED/ASK retries cover a slot migration; past that, failing fast with 503 is
    // better than holding the request through a whole failover.
    retryDelayOnFailover: 200,
    maxRedirections: 16,
    // A failover behind a partition sends no MOVED (the old master cannot be reached at
    // all): the slot map is learnt by asking again, every second rather than every 5 s.
    slotsRefreshInterval: 1000,
  };
}

/**
 * A node's Redis connections, constant whatever the number of waiting recvs. On one Redis
 * (URL or Sentinel): a command connection and a subscriber connection (with Sentinel, each
 * also holds failover-detector connections to the sentinels). On a cluster: a command
 * client (one connection per master) and a subscribing client (its own connection per
 * master, used only for topology, plus one sharded subscriber per master): 3 per master.
 * With write-ack, one more connection (per master on a cluster) for acknowledged writes.
 */
export function createRedisConnections(settings: RedisSettings): RedisConnections {
  // No command timeout on the subscriber: it carries no request-reply traffic past the
  // SSUBSCRIBE confirmations. A cluster's shard subscribers are restored by ioredis's
  // subscriber group; a single Redis's by RedisWakeupBus (below).
  const subscriberOptions: RedisOptions = {
    ...baseOptions(settings),
    commandTimeout: undefined,
    autoResubscribe: true,
  };
  const writeAck = (settings.writeAckReplicas ?? 0) !== 0;
  if (settings.clusterNodes) {
    const commands = new Cluster(settings.clusterNodes, clusterCommandOptions(settings));
    // A client of its own: sharded subscriptions on the command client lost wake-ups in
    // our cross-node race test (ioredis 6.0.0); on a separate client none were lost.
    const subscriber = new Cluster(settings.clusterNodes, {
      enableOfflineQueue: false,
      shardedSubscribers: true,
      redisOptions: subscriberOptions,
      clusterRetryStrategy: (attempt) => Math.min(100 * 2 ** attempt, 2000),
      slotsRefreshInterval: 1000,
    });
    const acked = writeAck
      ? new Cluster(settings.clusterNodes, {
          ...clusterCommandOptions(settings),
          enableAutoPipelining: false,
          redisOptions: ackedOptions(settings),
        })
      : undefined;
    // The heartbeat (below) on each master's command connection, as on one Redis; when it
    // drops one, the write-ack connection to the same master goes too.
    const stops: (() => void)[] = [];
    commands.on("+node", (node: Redis) => {
      const address = `${node.options.host}:${node.options.port}`;
      const sameMaster = () =>
        acked?.nodes().find((other) => `${other.options.host}:${other.options.port}` === address);
      stops.push(
        keepAlive(node, {
          intervalMs: 1000,
          timeoutMs: settings.commandTimeoutMs,
          onDrop: () => sameMaster()?.disconnect(true),
        }),
      );
    });
    const stop = () => {
      for (const stopOne of stops.splice(0)) stopOne();
    };
    return { commands, subscriber, acked, stop };
  }
  const make = (options: RedisOptions) =>
    settings.sentinel ? new Redis({ ...options, ...sentinelOptions(settings) }) : new Redis(settings.url!, options);
  const commands = make({ ...baseOptions(settings), enableAutoPipelining: true });
  // On one Redis the wake-up bus restores its own subscriptions after a reconnect:
  // ioredis's autoResubscribe sends them without handling their promises, and a connection
  // lost again before they are confirmed rejects them unhandled, which ends the process.
  const subscriber = make({ ...subscriberOptions, autoResubscribe: false });
  const acked = writeAck ? make(ackedOptions(settings)) : undefined;
  // The subscriber needs the heartbeat to notice a hung master at all. The command
  // connection notices one through its command timeouts, but a command timeout does not
  // drop the connection: after a partition the relay would wait for TCP's retransmission
  // backoff (up to about as long again as the cut) before its first command got through; a
  // new connection gets through as soon as the network heals. The write-ack connection is
  // dropped with the command connection, not by a PING of its own: its WAITs legitimately
  // hold it for up to REDIS_WRITE_ACK_TIMEOUT_MS each while a replica is missing, and a
  // PING queued behind a few of them would drop a healthy connection.
  const heartbeat = { intervalMs: 1000, timeoutMs: settings.commandTimeoutMs };
  const stops = [
    keepAlive(subscriber, heartbeat),
    keepAlive(commands, { ...heartbeat, onDrop: () => acked?.disconnect(true) }),
  ];
  const stop = () => {
    for (const stopOne of stops) stopOne();
  };
  return { commands, subscriber, acked, stop };
}

/**
 * A heartbeat for a connection. ioredis's command timeout only runs while a command is
 * outstanding, so a master that hangs (SIGSTOP, a network partition) leaves an idle
 * connection (the subscriber) open forever and its wake-ups silently stop; and a command
 * that times out fails alone, leaving its connection to TCP's retransmission backoff.
 * Every intervalMs: if the connection is ready, PING it; if no answer comes within
 * timeoutMs, or if it has been connecting for longer than that (a hung server accepts TCP
 * connections but never answers the ready check), drop it and reconnect (re-asking
 * Sentinel for the master), and call onDrop. The wake-up bus then resubscribes and every
 * waiter re-reads.
 */
export function keepAlive(
  client: Redis,
  { intervalMs, timeoutMs, onDrop }: { intervalMs: number; timeoutMs: number; onDrop?: () => void },
): () => void {
  let inFlight = false;
  let connectingSince: number | undefined;
  const timer = setInterval(() => {
    if (client.status === "end") return clearInterval(timer);
    if (client.status === "connect") {
      connectingSince ??= Date.now();
      if (Date.now() - connectingSince > timeoutMs) {
        connectingSince = undefined;
        client.disconnect(true);
        onDrop?.();
      }
      return;
    }
    connectingSince = undefined;
    if (client.status !== "ready" || inFlight) return;
    inFlight = true;
    let answered = false;
    const deadline = setTimeout(() => {
      if (answered || client.status !== "ready") return;
      client.disconnect(true);
      onDrop?.();
    }, timeoutMs);
    client
      .ping()
      .catch(() => undefined)
      .finally(() => {
        answered = true;
        inFlight = false;
        clearTimeout(deadline);
      });
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
