// The relay as a library: build the store the configuration asks for, listen, and stop
// gracefully. main.ts runs it as a process; tests and the benchmark start it in their own.
import { createServer, type Server } from "node:http";
import type { Socket } from "node:net";
import type { Store } from "express-rate-limit";
import { Cluster } from "ioredis";
import { createApp } from "./app.js";
import { createMetricsServer } from "./metrics-listener.js";
import { within } from "./deadline.js";
import type { Config } from "./config.js";
import type { Logger } from "./logger.js";
import { RedisWakeupBus } from "./realtime/redis-wakeups.js";
import { FailOpenRedisRateLimitStore } from "./http/rate-limit.js";
import { LeasedRedisRateLimitStore } from "./http/leased-rate-limit.js";
import { serverOptionsFor } from "./http/request-classes.js";
import { deferConnectionChecks, type ConnectionChecks } from "./http/connection-checks.js";
import { connectionBounds, limitConnections, type ConnectionLimit } from "./http/connection-limit.js";
import { declaredTooLarge } from "./http/body.js";
import { openFileLimit } from "./realtime/admission.js";
import { MemoryRoomStore } from "./store/memory/memory-store.js";
import { createRedisConnections, replicaProbe, type RedisClient } from "./store/redis/connection.js";
import { ensureStorageFormat } from "./store/redis/format-version.js";
import { RedisKeys } from "./store/redis/keys.js";
import { RedisRoomStore } from "./store/redis/redis-store.js";
import type { RoomStore } from "./store/room-store.js";

export interface RunningRelay {
  server: Server;
  url: string;
  /** The operator listener's base URL (GET `${metricsUrl}/metrics`); undefined with METRICS_PORT=off. */
  metricsUrl?: string;
  store: RoomStore;
  /** The slow-client timeouts the relay enforces (Node's own sweep is off). */
  connectionChecks: ConnectionChecks;
  /** The per-address connection bound (MAX_CONNECTIONS_PER_IP). */
  connectionLimit: ConnectionLimit;
  /** Graceful stop: readiness off, answer waiting recvs, finish in-flight requests, close. */
  shutdown(): Promise<void>;
  /** Settles once the store's format is checked: rejects with StorageFormatError on one this code does not know. */
  storageFormat: Promise<void>;
}

export interface StoreWiring {
  store: RoomStore;
  rateLimitStores?: { requests: Store; rooms: Store };
  /** The Redis connections, by role, for logging and metrics. */
  connections: [name: string, connection: RedisClient][];
  /**
   * On Redis: settles once the storage format is checked (docs/redis.md §6), as soon as Redis
   * answers; rejects with StorageFormatError on a format this code does not know. Until it
   * settles, every store call answers 503 and the node is not ready; listening does not wait
   * for it (a node started while Redis is down is alive, as in any outage).
   */
  storageFormat?: Promise<void>;
}

/** Builds the store the configuration asks for: Redis when configured, else in-process. */
export function createStore(config: Config): StoreWiring {
  const lifetimes = { idleMs: config.roomIdleMs, maxMs: config.roomMaxMs, endingKeepMs: config.roomEndingKeepMs };
  const budget = { roomsPerOwner: config.roomsPerClient, maxBytes: config.memoryStoreMaxBytes };
  if (!config.redis) return { store: new MemoryRoomStore(lifetimes, Date.now, budget), connections: [] };
  const keys = new RedisKeys(config.redis.keyPrefix);
  const { commands: client, subscriber, acked, replies, stop } = createRedisConnections(config.redis);
  const storageFormat = ensureStorageFormat(client, config.redis.keyPrefix);
  storageFormat.catch(() => undefined); // the caller's to handle (main.ts)
  const store = new RedisRoomStore({
    client,
    subscriber,
    wakeups: new RedisWakeupBus(subscriber, (code) => keys.wakeChannel(code), undefined, config.redis.commandTimeoutMs),
    keyPrefix: config.redis.keyPrefix,
    lifetimes,
    operationTimeoutMs: config.redis.commandTimeoutMs,
    replies,
    formatChecked: storageFormat,
    writeAck: acked
      ? {
          client: acked,
          replicas: config.redis.writeAckReplicas,
          timeoutMs: config.redis.writeAckTimeoutMs,
          operationTimeoutMs: config.redis.commandTimeoutMs,
          probe: replicaProbe(config.redis),
        }
      : undefined,
    onClose: stop,
    budget,
  });
  return {
    store,
    connections: [
      ["commands", client],
      ["subscriber", subscriber],
      ...(acked ? [["acked-writes", acked] as [string, RedisClient]] : []),
    ],
    storageFormat,
    rateLimitStores: {
      // Leased from one shared budget: no round trip per call, one limit across nodes (leased-rate-limit.ts).
      requests: new LeasedRedisRateLimitStore(client, keys, "requests", config.rateLimit.redisTimeoutMs),
      rooms: new FailOpenRedisRateLimitStore(client, keys.rateLimit("rooms"), config.rateLimit.redisTimeoutMs),
    },
  };
}

/**
 * Write-ack promises only as much as the master keeps: a master restarted (by a supervisor)
 * before Sentinel fails it over comes back with what it has on disk, and its replicas
 * resync from it and drop the rest, acknowledged or not (docs/high-availability.md). Says
 * so, once per master, when the master the write-ack connection reaches keeps no
 * append-only file. One Redis or Sentinel; on a cluster a command reaches no one master.
 */
function warnWithoutAof(acked: RedisClient, logger: Logger): void {
  if (acked instanceof Cluster) return;
  const warned = new Set<string>();
  acked.on("ready", () => {
    (acked.call("INFO", "server", "persistence") as Promise<string>).then(
      (info) => {
        const runId = /\brun_id:(\w+)/.exec(info)?.[1] ?? "";
        if (!/\baof_enabled:0\b/.test(info) || warned.has(runId)) return;
        warned.add(runId);
        logger.warn(
          { connection: "acked-writes" },
          "write-ack: the Redis master keeps no append-only file (appendonly no). Restarted before Sentinel fails it over, it comes back without the changes it acknowledged and its replicas resync from it and lose them too: set appendonly yes on every data node, or never restart a failed master automatically (docs/high-availability.md)",
        );
      },
      () => undefined,
    );
  });
}

export async function startRelay(config: Config, logger: Logger): Promise<RunningRelay> {
  const { store, rateLimitStores, connections, storageFormat = Promise.resolve() } = createStore(config);
  let shuttingDown = false;
  const app = createApp({ config, store, logger, rateLimitStores, isShuttingDown: () => shuttingDown });
  const { metrics } = app.locals;
  for (const [name, connection] of connections) {
    let connectedBefore = false;
    metrics.watchConnection(name);
    connection.on("error", (error: Error) => {
      metrics.redisErrors.inc({ connection: name });
      logger.warn({ connection: name, err: error }, "redis connection error");
    });
    connection.on("ready", () => {
      if (connectedBefore) metrics.redisReconnects.inc({ connection: name });
      connectedBefore = true;
      logger.info({ connection: name }, "redis ready");
    });
  }
  const acked = connections.find(([name]) => name === "acked-writes")?.[1];
  if (acked) warnWithoutAof(acked, logger);
  // Requests born with the app's prototypes: see http/request-classes.ts (heap per waiting seat).
  const server = createServer(serverOptionsFor(app), app).listen(config.port, config.host, config.listenBacklog);
  // Counted before any other connection listener sees the socket (connection-limit.ts).
  const bounds = connectionBounds(config.connectionsPerClient, openFileLimit());
  logger.info(
    { connectionsPerClient: bounds.perAddress || "none", connections: bounds.total ?? "none" },
    "connection bounds",
  );
  const trusted = app.get("trust proxy fn") as (address: string, hop: number) => boolean;
  const connectionLimit = limitConnections(server, {
    ...bounds,
    isTrustedProxy: (address) => trusted(address, 0),
    onRefused: () => metrics.countError("rate_limited"),
  });
  // A body declared larger than the relay takes is refused before it is sent: no 100 Continue,
  // and the app answers 400 too_large at once (body.ts). Node's default writes 100 Continue
  // before the app sees the request.
  server.on("checkContinue", (req, res) => {
    if (!declaredTooLarge(req)) res.writeContinue();
    server.emit("request", req, res);
  });
  // Slow clients (headers trickled, a 13 MiB body trickled) are timed out by the relay, not
  // by Node's sweep, which answered 408 to requests that had arrived while the event loop
  // was busy (connection-checks.ts).
  const connectionChecks = deferConnectionChecks(server, {
    headersTimeoutMs: config.headersTimeoutMs,
    requestTimeoutMs: config.requestTimeoutMs,
    idleTimeoutMs: config.keepAliveTimeoutMs,
    intervalMs: config.connectionCheckIntervalMs,
    // Answered outside Express: counted here, so the first one shows on the dashboard too.
    onTimeout: () => metrics.countError("request_timeout"),
  });
  server.on("close", () => connectionChecks.stop());
  // Connections, so that shutdown can close those that never sent a byte: Node's
  // closeIdleConnections leaves them open (no request has ended on them), and they would
  // hold the drain for SHUTDOWN_DRAIN_SECONDS.
  const sockets = new Set<Socket>();
  // One listener for every socket, the socket being `this` (no closure and once-wrapper per
  // connection); 'close' comes once.
  function forget(this: Socket): void {
    sockets.delete(this);
  }
  server.on("connection", (socket: Socket) => {
    sockets.add(socket);
    socket.on("close", forget);
  });
  await new Promise<void>((resolve, reject) => server.once("listening", resolve).once("error", reject));
  // Above the load balancer's idle timeout, so the balancer closes idle connections first.
  server.keepAliveTimeout = config.keepAliveTimeoutMs;
  const url = urlOf(server, config.host);
  // /metrics on its own listener, never on the public port (metrics-listener.ts).
  let metricsServer: Server | undefined;
  if (config.metrics) {
    const { port, host, cacheMs } = config.metrics;
    metricsServer = createMetricsServer(metrics.registry, cacheMs);
    const listening = new Promise<void>((resolve, reject) =>
      metricsServer!.once("listening", resolve).once("error", reject),
    );
    metricsServer.listen(port, host);
    try {
      await listening;
    } catch (error) {
      server.close();
      await store.close();
      throw error;
    }
  }
  const metricsUrl = metricsServer && urlOf(metricsServer, config.metrics!.host);

  const shutdown = async () => {
    if (shuttingDown) return;
    shuttingDown = true;
    logger.info({ waitingRecvs: app.locals.waitingRecvs.size, streams: app.locals.streams.size }, "shutting down");
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    app.locals.waitingRecvs.drain();
    app.locals.streams.drain();
    server.closeIdleConnections();
    // A connection that has not sent a byte a second into the shutdown is a spare, not a
    // request on its way (Node reads a request's first bytes as soon as they arrive).
    const spares = setTimeout(() => {
      for (const socket of sockets) if (socket.bytesRead === 0) socket.destroy();
    }, 1000).unref();
    const drained = await within(
      closed.then(() => true),
      config.shutdownDrainMs,
      () => false,
      { unref: true },
    );
    clearTimeout(spares);
    if (!drained) server.closeAllConnections();
    // The tokens this node holds go back to the shared budget before Redis is closed.
    const requests = rateLimitStores?.requests;
    if (requests instanceof LeasedRedisRateLimitStore) await requests.close();
    await store.close();
    // Scraped until the end: the drain is what an operator watches.
    if (metricsServer) {
      const stopped = new Promise<void>((resolve) => metricsServer!.close(() => resolve()));
      metricsServer.closeAllConnections();
      await stopped;
    }
    logger.info({ drained }, "stopped");
  };
  return { server, url, metricsUrl, store, connectionChecks, connectionLimit, shutdown, storageFormat };
}

/** http://host:port of a listening server; a wildcard address is reached on loopback. */
function urlOf(server: Server, configuredHost: string): string {
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  const host = configuredHost.includes(":") ? `[${configuredHost}]` : configuredHost;
  return `http://${host === "0.0.0.0" || host === "[::]" ? "127.0.0.1" : host}:${port}`;
}
