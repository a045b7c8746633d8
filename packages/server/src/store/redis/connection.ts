// Redis connections, configured on purpose: commands fail fast while Redis is unreachable
// (no offline queue, a command timeout) so that requests answer 503 instead of hanging,
// and the client reconnects by itself with a capped backoff. Three ways to reach the store:
// one Redis (a URL), a Redis Cluster (seed nodes), or a master found through Sentinel.
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from "ioredis";
import type { RedisConfig } from "../../config.js";
import { ReplyClock } from "./reply-clock.js";

export type RedisSettings = Partial<Pick<RedisConfig, "url" | "clusterNodes" | "sentinel" | "username" | "password">> &
  Pick<RedisConfig, "tls" | "commandTimeoutMs"> & {
    /** A connection of its own for writes that WAIT for replicas (see write-ack.ts). */
    writeAckReplicas?: number | "all";
  };

export type RedisClient = Redis | Cluster;

/**
 * Closes a connection for good: QUIT, then disconnect. On a Cluster, also stops its slot-map
 * refresh loop (slotsRefreshInterval) for good. In ioredis 6.0.0 a refresh that is in flight
 * when disconnect() clears the loop's timer re-arms it from its callback, and the loop then
 * runs every interval for ever against an empty node pool: a closed store kept its process
 * alive. So: wait out the refresh in flight, then clear the timer it armed.
 */
export async function closeConnection(connection: RedisClient): Promise<void> {
  closedOnPurpose.add(connection);
  await connection
    .quit()
    .catch(() => undefined)
    .finally(() => connection.disconnect());
  if (!(connection instanceof Cluster)) return;
  const internals = connection as unknown as { isRefreshing?: boolean; clearNodesRefreshInterval?: () => void };
  // A guard, not a measure: a refresh against disconnected nodes ends within its own timeout.
  for (let i = 0; internals.isRefreshing && i < 200; i++) await new Promise((r) => setTimeout(r, 25));
  internals.clearNodesRefreshInterval?.();
}

/** The reconnect backoff: 100 ms, 200 ms, … up to 1 s. */
const RETRY_DELAY = (attempt: number) => Math.min(50 * 2 ** attempt, 1000);

/** Connections closed by closeConnection: their "end" is final. */
const closedOnPurpose = new WeakSet<RedisClient>();
/** Connections that reconnectAfterEnd brings back from an "end" they were not asked for. */
const revived = new WeakSet<Redis>();

/**
 * ioredis ends a connection for good (status "end": no reconnect, every command fails
 * "Connection is closed.") when a connect attempt fails inside its connector instead of on
 * the socket. With Sentinel that happens whenever the connection is dropped while the
 * connector is asking a sentinel for the master: the drop clears the connector's
 * `connecting` flag, the lookup then throws, and the client ends. The drops come exactly
 * during a failover: ioredis's own failover detector on +switch-master (from the detector
 * of an earlier connection, while reconnects to the dead master are still under way), the
 * heartbeat (below), READONLY. Both relays of a failover test once ended their
 * connections this way and answered 503 for the rest of the run (redis/ioredis#1683 is the
 * same report from production). So a connection that ends without closeConnection is
 * connected again with the connection's own backoff, for as long as the process lives.
 */
function reconnectAfterEnd(client: Redis): Redis {
  revived.add(client);
  // disconnect() and quit() are closes on purpose too (a caller's, or ioredis's own on a
  // failed connect is disconnect(true), which reconnects): their "end" is final, or the
  // connection outlives its owner and keeps the process alive.
  const disconnect = client.disconnect.bind(client);
  client.disconnect = (reconnect = false) => {
    if (!reconnect) closedOnPurpose.add(client);
    disconnect(reconnect);
  };
  const quit = client.quit.bind(client);
  client.quit = ((...args: Parameters<Redis["quit"]>) => {
    closedOnPurpose.add(client);
    return quit(...args);
  }) as Redis["quit"];
  let attempt = 0;
  client.on("ready", () => {
    attempt = 0;
  });
  client.on("end", () => {
    if (closedOnPurpose.has(client)) return;
    const delay = RETRY_DELAY(++attempt);
    setTimeout(() => {
      // A failed attempt ends the connection again, and comes back here.
      if (!closedOnPurpose.has(client) && client.status === "end") client.connect().catch(() => undefined);
    }, delay).unref();
  });
  return client;
}

const baseOptions = (settings: RedisSettings): RedisOptions => ({
  enableOfflineQueue: false,
  commandTimeout: settings.commandTimeoutMs,
  // A script that Redis may already have run must not be sent again behind our back:
  // the request fails instead, and the client's idempotency key makes its retry safe.
  // (It also keeps a WAIT from being resent alone on a new connection, where it would
  // confirm at once a write that may be gone.)
  autoResendUnfulfilledCommands: false,
  maxRetriesPerRequest: 0,
  retryStrategy: RETRY_DELAY,
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

/**
 * Write-ack "all": asks a replica that left its master where it went (INFO replication),
 * on a short-lived connection of its own with the data nodes' credentials and TLS, at the
 * address its master lists (through Sentinel's NAT map, as the relay reaches the master).
 * Undefined when it does not answer within the command timeout: down, or not reachable.
 */
export function replicaProbe(settings: RedisSettings): (address: string) => Promise<string | undefined> {
  const url = settings.url ? new URL(settings.url) : undefined;
  return async (address) => {
    const at = address.lastIndexOf(":");
    const reported = { host: address.slice(0, at), port: Number(address.slice(at + 1)) };
    const { host, port } = settings.sentinel?.natMap?.[address] ?? reported;
    const client = new Redis({
      host,
      port,
      username: url ? decodeURIComponent(url.username) || undefined : settings.username,
      password: url ? decodeURIComponent(url.password) || undefined : settings.password,
      tls: (url ? url.protocol === "rediss:" : settings.tls) ? {} : undefined,
      lazyConnect: true,
      enableOfflineQueue: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      connectTimeout: settings.commandTimeoutMs,
      commandTimeout: settings.commandTimeoutMs,
    });
    client.on("error", () => undefined);
    try {
      await client.connect();
      return await client.info("replication");
    } catch {
      return undefined;
    } finally {
      client.disconnect();
    }
  };
}

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
  /**
   * When Redis last answered on the command and write-ack connections (a store call's
   * patience). One Redis only: on a Cluster, replies from the healthy masters would keep a
   * call to a silent one waiting to twice the timeout, so calls there answer 503 at it.
   */
  replies?: ReplyClock;
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
    reconnectAfterEnd(
      settings.sentinel ? new Redis({ ...options, ...sentinelOptions(settings) }) : new Redis(settings.url!, options),
    );
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
  const replies = new ReplyClock().watch(commands);
  if (acked) replies.watch(acked);
  return { commands, subscriber, acked, replies, stop };
}

/**
 * A heartbeat for a connection. ioredis's command timeout only runs while a command is
 * outstanding, so a master that hangs (SIGSTOP, a network partition) leaves an idle
 * connection (the subscriber) open forever and its wake-ups silently stop; and a command
 * that times out fails alone, leaving its connection to TCP's retransmission backoff.
 * Every intervalMs, if the connection is ready, it is PINGed. It is dropped (and remade,
 * re-asking Sentinel for the master; onDrop is called) when Redis has sent nothing for
 * timeoutMs while that PING was outstanding, or while the connection was being set up (a
 * hung server accepts TCP connections but never answers the ready check). Silence, not the
 * PING's round trip: on a slow link the PING queues behind a whole auto-pipeline and takes
 * up to two round trips while replies keep coming, and dropping that connection turned a
 * slow store into an unavailable one (every call 503 while it reconnected).
 */
export function keepAlive(
  client: Redis,
  { intervalMs, timeoutMs, onDrop }: { intervalMs: number; timeoutMs: number; onDrop?: () => void },
): () => void {
  const clock = new ReplyClock().watch(client);
  // Silent for the whole timeout: libuv's timers run on a clock cached per loop turn and may
  // fire a millisecond early against performance.now(), so a few ms short still counts.
  const silentLongEnough = (sentAt: number) => clock.silentFor(sentAt) >= timeoutMs - 5;
  let pingSentAt: number | undefined;
  let connectingSince: number | undefined;
  let check: NodeJS.Timeout | undefined;
  let stopped = false;
  const settle = (sentAt: number) => {
    if (pingSentAt !== sentAt) return;
    pingSentAt = undefined;
    clearTimeout(check);
  };
  const drop = () => {
    pingSentAt = undefined;
    clearTimeout(check);
    client.disconnect(true);
    onDrop?.();
  };
  // Whether Redis has been silent for a whole timeout since the PING: then drop. Decided after
  // the event loop has read its sockets (setImmediate), so that a loop held past the deadline
  // does not mistake a reply waiting in the buffer for silence.
  const judge = (sentAt: number) => {
    if (stopped || pingSentAt !== sentAt) return;
    if (client.status !== "ready") return settle(sentAt);
    if (silentLongEnough(sentAt)) return drop();
    const silentMs = clock.silentFor(sentAt);
    // Replies came meanwhile: judge again once the link could have been silent for as long.
    clearTimeout(check);
    check = setTimeout(() => setImmediate(judge, sentAt), timeoutMs - silentMs);
    check.unref();
  };
  const timer = setInterval(() => {
    // An ended connection is stopped for good, unless reconnectAfterEnd brings it back.
    if (client.status === "end") return revived.has(client) && !closedOnPurpose.has(client) ? undefined : stop();
    if (client.status === "connect") {
      connectingSince ??= performance.now();
      if (clock.silentFor(connectingSince) > timeoutMs) {
        connectingSince = undefined;
        drop();
      }
      return;
    }
    connectingSince = undefined;
    if (client.status !== "ready" || pingSentAt !== undefined) return;
    const sentAt = performance.now();
    pingSentAt = sentAt;
    check = setTimeout(() => setImmediate(judge, sentAt), timeoutMs);
    check.unref();
    // A PONG settles it. A PING that failed (its own command timeout, which runs out with
    // the check) is judged like one still outstanding: by the silence since it was sent; a
    // link that answered other commands meanwhile is alive, and the next PING goes out.
    client.ping().then(
      () => settle(sentAt),
      () =>
        setImmediate(() => {
          if (stopped || pingSentAt !== sentAt) return;
          if (client.status === "ready" && silentLongEnough(sentAt)) return drop();
          settle(sentAt);
        }),
    );
  }, intervalMs);
  timer.unref();
  const stop = () => {
    stopped = true;
    clearInterval(timer);
    clearTimeout(check);
  };
  return stop;
}
