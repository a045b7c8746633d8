// Configuration: parsed once, at start-up, from the environment. Nothing else in the
// server reads process.env. A bad value stops start-up with a message naming the variable.
import { MAX_WAIT_MS, MCP_KEEPALIVE_MS, MCP_MAX_WAIT_MS, WAITERS_PER_SEAT } from "@duet/protocol";
import { z } from "zod";
import {
  flag,
  hostPortList,
  integer,
  maxWaiters,
  metricsPort,
  natMap,
  optionalText,
  trustProxy,
} from "./config-fields.js";

export type { HostPort } from "./config-fields.js";

export const ConfigSchema = z
  .object({
    PORT: integer(8080, 0, 65535).describe("TCP port to listen on; `0` picks a free one."),
    HOST: optionalText
      .transform((v) => v ?? "127.0.0.1")
      .describe("Address to listen on. Containers must set `0.0.0.0` (the image does)."),
    METRICS_PORT: metricsPort.describe(
      "TCP port of the operator listener that serves `/metrics` (Prometheus text), apart from the public port, which answers `/metrics` 404; `0` picks a free one, `off` serves no metrics.",
    ),
    METRICS_HOST: optionalText
      .transform((v) => v ?? "127.0.0.1")
      .describe(
        "Address the metrics listener binds. Prometheus in another container or pod needs `0.0.0.0` (the image sets it); keep that port off the load balancer.",
      ),
    METRICS_CACHE_MS: integer(1000, 0, 60_000).describe(
      "A `/metrics` render is served to every scrape for this long (scrapes meanwhile share one render): at most one render per this period per node. One connection is answered at most once per this period or 1 s, whichever is shorter (a scrape that comes sooner on it waits its turn), so a scrape flood on keep-alive connections costs one answer per connection a second. `0` renders each scrape and never waits (tests).",
    ),
    PUBLIC_URL: optionalText
      .pipe(z.url({ protocol: /^https?$/ }).optional())
      .transform((v) => v?.replace(/\/+$/, ""))
      .describe(
        "Public base URL, e.g. `https://duet.example.com`, for `join_url`, the share block and the recipe, and the one `Host` that `/mcp` accepts besides loopback names (DNS-rebinding protection). Unset: taken from each request. Set it behind a load balancer.",
      ),
    TRUST_PROXY: trustProxy.describe(
      "Proxies in front whose `X-Forwarded-For`/`-Proto` are honoured: their number (`1` behind one nginx or ingress-nginx) or their addresses/subnets, comma-separated (`10.0.0.0/8,127.0.0.1`). `true` is refused: it would let any client choose the IP its rate limit counts.",
    ),
    REDIS_URL: optionalText
      .pipe(z.url({ protocol: /^rediss?$/ }).optional())
      .describe(
        "`redis://[:password@]host:6379[/db]` or `rediss://` (TLS). Unset, with `REDIS_CLUSTER_NODES` unset too: rooms live in process memory (one node only, lost on restart).",
      ),
    REDIS_CLUSTER_NODES: hostPortList.describe(
      "Redis Cluster seed nodes, `host:port,host:port`. Exactly one of `REDIS_URL`, `REDIS_CLUSTER_NODES` and `REDIS_SENTINELS` may be set.",
    ),
    REDIS_SENTINELS: hostPortList.describe(
      "Sentinels of a Sentinel-managed Redis, `host:port,host:port` (with `REDIS_SENTINEL_NAME`); the relay follows failovers (docs/high-availability.md).",
    ),
    REDIS_SENTINEL_NAME: optionalText.describe(
      "The master name the sentinels monitor (`sentinel monitor <name> …`); required with `REDIS_SENTINELS`.",
    ),
    REDIS_SENTINEL_USERNAME: optionalText.describe("ACL user for the sentinels (managed Sentinel)."),
    REDIS_SENTINEL_PASSWORD: optionalText.describe("Password for the sentinels (managed Sentinel)."),
    REDIS_SENTINEL_TLS: flag.describe("`true`: talk TLS to the sentinels."),
    REDIS_SENTINEL_NAT_MAP: natMap.describe(
      "Addresses the sentinels report that this relay cannot reach, mapped to ones it can: `reported-host:port=reachable-host:port,…`.",
    ),
    // The data nodes' credentials and TLS when they are found through Sentinel or a cluster's
    // seeds (REDIS_URL carries its own: redis://user:password@host, rediss:// for TLS).
    REDIS_USERNAME: optionalText.describe(
      "ACL user of the Redis data nodes found through Sentinel or cluster seeds (`REDIS_URL` carries its own).",
    ),
    REDIS_PASSWORD: optionalText.describe(
      "Password of the Redis data nodes found through Sentinel or cluster seeds (`REDIS_URL` carries its own).",
    ),
    REDIS_TLS: flag.describe(
      "`true`: TLS to the Redis data nodes found through Sentinel or cluster seeds (`rediss://` does it for `REDIS_URL`).",
    ),
    // Acknowledged means replicated: with N > 0 a state change answers success only once
    // WAIT N confirms it reached N replicas, within the timeout (else 503).
    REDIS_WRITE_ACK_REPLICAS: z
      .string()
      .trim()
      .optional()
      .transform((value, ctx): number | "all" => {
        if (value === undefined || value === "") return 0;
        if (value === "all") return "all";
        if (/^[0-9]+$/.test(value) && Number(value) <= 64) return Number(value);
        ctx.addIssue({ code: "custom", message: "must be `all` or a whole number from 0 to 64" });
        return z.NEVER;
      })
      .describe(
        `A state change (a call that changes a room, docs/protocol.md §4.1) answers success only once replicas have it (\`WAIT\`); else 503. \`all\`: every replica the master has right now, never fewer than one (a replica that left counts for 10 s more): nothing acknowledged is lost when one node fails, and after a failover changes resume as soon as the new master has a replica. A number: exactly that many replicas, whatever the master has. \`0\`: as soon as the master has it. docs/high-availability.md says what each promises.`,
      ),
    REDIS_WRITE_ACK_TIMEOUT_MS: integer(500, 1, 60_000).describe(
      "How long a state change waits for its replicas (`REDIS_WRITE_ACK_REPLICAS`) before it answers 503; below `REDIS_COMMAND_TIMEOUT_MS`.",
    ),
    REDIS_KEY_PREFIX: optionalText
      .transform((v) => v ?? "duet:")
      .describe("Prefix of every Redis key and channel; lets several installations share one Redis."),
    // 1.5 s: with the rate-limit count's own 500 ms bound, no call outlasts its wait by more
    // than about 2 s while Redis is silent.
    REDIS_COMMAND_TIMEOUT_MS: integer(1500, 50, 60_000).describe(
      "A store call this slow answers 503 `unavailable` when Redis has sent nothing for as long (a connection that silent is also remade), so no call outlasts its wait by more than about 2 s while Redis is silent. While Redis keeps answering (a slow link; one Redis or Sentinel, not a Cluster), a call waits on, up to twice this.",
    ),
    ROOM_IDLE_SECONDS: integer(1800, 1, 86_400).describe(
      "Idle lifetime: a room ends this long after its last authenticated call.",
    ),
    ROOM_MAX_SECONDS: integer(1800, 1, 86_400).describe(
      "Hard lifetime: a room ends this long after open, whatever happens.",
    ),
    // 10 minutes: far longer than a recv waits (25 s) or a client retries, long enough for an
    // agent to come back from a slow turn and still learn how its room ended.
    ROOM_ENDING_KEEP_SECONDS: integer(600, 0, 86_400).describe(
      "After a room ends, its two seats are told how (404 with `ended`) for this long; `0` keeps every 404 bare.",
    ),
    UA_POLICY: z
      .enum(["denylist", "off", "strict"])
      .optional()
      .transform((v) => v ?? "denylist")
      .describe(
        "`denylist`: 403 for empty and generic library User-Agents on room calls; `strict`: only `duet/…`; `off`: any.",
      ),
    RATE_LIMIT_WINDOW_SECONDS: integer(60, 1, 86_400).describe(
      "Window of the per-IP rate limits (shared by all nodes through Redis).",
    ),
    RATE_LIMIT_REQUESTS: integer(600, 0).describe(
      "Room calls and stats reads per IP per window; `0` turns the limit off. On Redis one budget for all nodes: each node admits only with tokens it leased from it (at most 1 % of the limit at a time), so a client gets at most this many however it spreads its calls (docs/security.md).",
    ),
    RATE_LIMIT_ROOMS: integer(60, 0).describe(
      "Opens and joins per IP per window, on top of the above; `0` turns the limit off.",
    ),
    RATE_LIMIT_REDIS_TIMEOUT_MS: integer(500, 10, 60_000).describe(
      "How long a call waits for the rate limits' shared count in Redis; past it the node counts the request limit alone until Redis answers again, and lets opens and joins through (the call itself then meets the store).",
    ),
    ROOMS_PER_IP: integer(50, 0).describe(
      "Rooms one client IP may hold open at once (opened and not yet closed or ended), counted like the rate limits (IPv6 per /56, through `TRUST_PROXY`): with 2 MiB of unacked text each at most, this bounds what one address pins in the store. Beyond it open answers 429 `too_many_rooms` with `Retry-After`; `0` turns the limit off.",
    ),
    // 1,024: two connections (a long-poll and a call) for each of 512 agents behind one NAT,
    // more than the per-IP request limit lets one address keep busy.
    MAX_CONNECTIONS_PER_IP: integer(1024, 0).describe(
      "Open connections one client address may hold on a node (IPv6 per /56), counted when it connects: past it a new connection gets 429 `rate_limited` and is closed. Peers that `TRUST_PROXY` trusts are exempt (the proxy bounds its clients: nginx `limit_conn`, ingress-nginx `limit-connections`). With an open-file limit (`ulimit -n`) the node also accepts at most that limit less 256 connections in all, and one address at most half of those, so descriptors stay free for Redis, the metrics listener and everyone else. `0` turns the per-address bound off.",
    ),
    MEMORY_STORE_MAX_BYTES: integer(256 * 1024 * 1024, 1024 * 1024).describe(
      "In-process store only (no Redis): the unacked text, idempotency keys and rooms it may hold in all, in bytes; beyond it open and send answer 507 `insufficient_storage` with `Retry-After`. On Redis, `maxmemory` with `noeviction` is the bound (writes then answer 503).",
    ),
    // A 2 MiB text of control characters is 12.6 MB of JSON; Node keeps what a client does not
    // read for as long as the connection stays open (no write timeout once the request is read).
    SLOW_READER_TIMEOUT_MS: integer(30_000, 100, 3_600_000).describe(
      "An answer its client has not taken this long after the relay ended it (bytes still in the node's socket) is dropped with its connection, so a client that never reads cannot pin it in the node.",
    ),
    CLIENT_UNSENT_BYTES_MAX: integer(64 * 1024 * 1024, 0).describe(
      "Bytes of ended answers one client IP (counted like the rate limits) may leave untaken on a node; beyond it its calls answer 429 `rate_limited` with `Retry-After` until those answers are read or dropped (`SLOW_READER_TIMEOUT_MS`), and an answer that ends while it is beyond is dropped at once. What one client can pin per node is this plus one answer (up to 12.6 MB). `0`: any answer left untaken refuses the next call.",
    ),
    WAKE_RECHECK_SECONDS: integer(150, 1, 3600).describe(
      "A waiting recv or stream re-reads its inbox this often (±20 %) even without a wake-up: a last resort, since the subscriber's heartbeat and the reconnect re-read already bound a lost wake-up. Long-polls wait at most 25 s, so at the default only streams ever re-read (0.4 times a minute).",
    ),
    MAX_WAITERS: maxWaiters.describe(
      "The most waiting calls (recvs and statuses with a wait, open streams, held self-tests) this node holds; past it a new one is answered 503 `unavailable` with Retry-After (a call whose answer is there at once is still served). `/readyz` does not depend on it. `auto`: from the container's memory limit (less 128 MiB, 48 KiB per waiter) and the open-file limit (less 1,024), whichever is lower, none when neither is set; `off`: no cap.",
    ),
    // An agent waits with one recv (or one status) at a time; a few more cover a retry whose
    // old connection is not dead yet. Memory: each of a seat's waiters is answered its inbox
    // (up to 12.6 MB of JSON), so this bounds what one message costs a node.
    MAX_WAITERS_PER_SEAT: integer(WAITERS_PER_SEAT, 1, 1000).describe(
      "Waiting recvs and statuses one seat holds on this node, together; one more answers the seat's oldest at once as if its wait ran out (recv: `{\"messages\": []}`; nothing is lost, recv never consumes), and the new one waits. A room's two seats hold twice this. Streams have their own bound (two per seat, the oldest ends `replaced`).",
    ),
    MAX_WAITERS_PER_CLIENT: maxWaiters.describe(
      "Waiting calls (recvs, statuses, streams, held self-tests) one client IP holds on this node, counted like the rate limits (IPv6 per /56, through `TRUST_PROXY`); past it a new one is answered 429 `too_many_waiters` with Retry-After, so one address never holds the node's whole `MAX_WAITERS`. `auto`: an eighth of `MAX_WAITERS` (at least 1), or 1,024 when the node has no cap; `off`: no bound.",
    ),
    MCP_MAX_WAIT_MS: integer(MCP_MAX_WAIT_MS, 1000, MAX_WAIT_MS).describe(
      `The longest a waiting MCP tool call (recv, status) holds its answer, whatever \`wait\` it asked for; it sends a keep-alive every ${MCP_KEEPALIVE_MS / 1000} s meanwhile. A proxy that buffers answers shows the client nothing until the answer ends, so a longer hold can outlast the proxy's or the MCP client's timeout and hang the call (docs/mcp.md, "Behind a proxy"). Each empty answer costs an agent one more turn: raise it (up to ${MAX_WAIT_MS}) when every client's path is known to hold long answers. REST long-polls keep their ${MAX_WAIT_MS} ms.`,
    ),
    STATS_CACHE_MS: integer(1000, 0, 60_000).describe(
      "`/v1/stats` and the relay-wide metrics are read from the store at most this often per node (on Redis each read is 2,048 pipelined commands).",
    ),
    SHUTDOWN_DRAIN_SECONDS: integer(10, 0, 600).describe(
      "On SIGTERM: readiness turns 503, waiting recvs answer at once, and in-flight calls get this long to finish before connections are cut.",
    ),
    KEEP_ALIVE_TIMEOUT_SECONDS: integer(65, 1, 3600).describe(
      "Idle keep-alive of client connections; keep it above the load balancer's upstream idle timeout.",
    ),
    HEADERS_TIMEOUT_MS: integer(20_000, 100, 600_000).describe(
      "A connection that starts a request and does not finish its headers within this long (counted from the first bytes of it the relay reads) gets 408 `request_timeout` and is closed (slowloris); at most `KEEP_ALIVE_TIMEOUT_SECONDS` + 1 s. One that opens and sends nothing gets the same after `KEEP_ALIVE_TIMEOUT_SECONDS`. A request being answered (a long-poll, a stream) is never timed out.",
    ),
    REQUEST_TIMEOUT_MS: integer(60_000, 100, 3_600_000).describe(
      "A request whose body has not all arrived this long after its headers gets 408 `request_timeout` and its connection is closed.",
    ),
    CONNECTION_CHECK_INTERVAL_MS: integer(1000, 10, 60_000).describe(
      "How often the relay looks for connections past those two timeouts (instead of Node's own 30 s sweep), judging them only after the input that was waiting has been read: a slow client is closed within its timeout plus this.",
    ),
    // Node's default is 511: a node holding thousands of long-polls that restarts, or whose
    // clients reconnect together, overflows it while its event loop is busy, and the kernel
    // then drops connections (clients see resets). The kernel caps it at net.core.somaxconn.
    LISTEN_BACKLOG: integer(4096, 1, 65_535).describe(
      "Connections the kernel queues for the relay before it accepts them (capped by `net.core.somaxconn`). Reconnect storms of thousands of clients need more than Node's default of 511.",
    ),
    LOG_LEVEL: z
      .enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"])
      .optional()
      .transform((v) => v ?? "info")
      .describe("`fatal`, `error`, `warn`, `info`, `debug`, `trace` or `silent`."),
  })
  .superRefine((env, ctx) => {
    const ways = (["REDIS_URL", "REDIS_CLUSTER_NODES", "REDIS_SENTINELS"] as const).filter(
      (name) => env[name] !== undefined,
    );
    if (ways.length > 1) {
      ctx.addIssue({
        code: "custom",
        path: [ways[1]!],
        message: `${ways.join(" and ")} are all set: REDIS_URL (one Redis), REDIS_CLUSTER_NODES (a cluster) and REDIS_SENTINELS (Sentinel) are three ways to reach the store; set exactly one`,
      });
    }
    const sentinelOnly = [
      "REDIS_SENTINEL_NAME",
      "REDIS_SENTINEL_USERNAME",
      "REDIS_SENTINEL_PASSWORD",
      "REDIS_SENTINEL_NAT_MAP",
    ] as const;
    if (env.REDIS_SENTINELS === undefined) {
      for (const name of sentinelOnly) {
        if (env[name] !== undefined)
          ctx.addIssue({ code: "custom", path: [name], message: "only applies with REDIS_SENTINELS" });
      }
      if (env.REDIS_SENTINEL_TLS)
        ctx.addIssue({ code: "custom", path: ["REDIS_SENTINEL_TLS"], message: "only applies with REDIS_SENTINELS" });
    } else if (env.REDIS_SENTINEL_NAME === undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["REDIS_SENTINEL_NAME"],
        message: "is required with REDIS_SENTINELS: the name Sentinel monitors the master under",
      });
    }
    if (env.REDIS_URL !== undefined) {
      for (const name of ["REDIS_USERNAME", "REDIS_PASSWORD"] as const) {
        if (env[name] !== undefined)
          ctx.addIssue({
            code: "custom",
            path: [name],
            message: "not with REDIS_URL: put it in the URL (redis://user:password@host:port)",
          });
      }
      if (env.REDIS_TLS)
        ctx.addIssue({ code: "custom", path: ["REDIS_TLS"], message: "not with REDIS_URL: use a rediss:// URL" });
    }
    if (env.REDIS_WRITE_ACK_REPLICAS !== 0) {
      if (ways.length === 0)
        ctx.addIssue({
          code: "custom",
          path: ["REDIS_WRITE_ACK_REPLICAS"],
          message: "needs Redis (REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS)",
        });
      // The pipeline [script, WAIT] must answer within the command timeout.
      if (env.REDIS_WRITE_ACK_TIMEOUT_MS >= env.REDIS_COMMAND_TIMEOUT_MS) {
        ctx.addIssue({
          code: "custom",
          path: ["REDIS_WRITE_ACK_TIMEOUT_MS"],
          message: `must be below REDIS_COMMAND_TIMEOUT_MS (${env.REDIS_COMMAND_TIMEOUT_MS}): the script and its WAIT answer within one command timeout`,
        });
      }
    }
  });

/** The server's settings, in the units the code uses: what settingsFrom makes of the schema. */
export type Config = ReturnType<typeof settingsFrom>;
/** How to reach Redis: exactly one of url, clusterNodes, sentinel. */
export type RedisConfig = NonNullable<Config["redis"]>;

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "ConfigError";
  }
}

/** Reads the configuration from an environment (process.env in main). Throws ConfigError. */
export function loadConfig(env: Record<string, string | undefined>): Config {
  const parsed = ConfigSchema.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(
      parsed.error.issues.map((issue) => `${issue.path.join(".") || "environment"}: ${issue.message}`),
    );
  }
  return settingsFrom(parsed.data);
}

/**
 * The schema's values in the units and shape the code uses. Config's type is inferred from
 * this function and the schema: each setting is declared once (its variable, default and
 * description in ConfigSchema) and mapped here.
 */
function settingsFrom(e: z.infer<typeof ConfigSchema>) {
  const onRedis = e.REDIS_URL !== undefined || e.REDIS_CLUSTER_NODES !== undefined || e.REDIS_SENTINELS !== undefined;
  return {
    port: e.PORT,
    host: e.HOST,
    /** The operator listener serving /metrics; undefined when METRICS_PORT is off. */
    metrics:
      e.METRICS_PORT === false
        ? undefined
        : { port: e.METRICS_PORT, host: e.METRICS_HOST, cacheMs: e.METRICS_CACHE_MS },
    publicUrl: e.PUBLIC_URL,
    trustProxy: e.TRUST_PROXY,
    redis: onRedis ? redisSettingsFrom(e) : undefined,
    roomIdleMs: e.ROOM_IDLE_SECONDS * 1000,
    roomMaxMs: e.ROOM_MAX_SECONDS * 1000,
    /** How long a room's seats still learn how it ended, after it ended. */
    roomEndingKeepMs: e.ROOM_ENDING_KEEP_SECONDS * 1000,
    userAgentPolicy: e.UA_POLICY,
    rateLimit: {
      windowMs: e.RATE_LIMIT_WINDOW_SECONDS * 1000,
      requestsPerWindow: e.RATE_LIMIT_REQUESTS,
      roomsPerWindow: e.RATE_LIMIT_ROOMS,
      redisTimeoutMs: e.RATE_LIMIT_REDIS_TIMEOUT_MS,
    },
    /** Live rooms one client address may hold (0: no limit). */
    roomsPerClient: e.ROOMS_PER_IP,
    /** Open connections one client address may hold on a node (0: no bound). */
    connectionsPerClient: e.MAX_CONNECTIONS_PER_IP,
    /** The in-process store's budget, in bytes. */
    memoryStoreMaxBytes: e.MEMORY_STORE_MAX_BYTES,
    /** An answer not taken by its client this long after it ended is dropped with its connection. */
    slowReaderTimeoutMs: e.SLOW_READER_TIMEOUT_MS,
    /** Untaken answer bytes one client may hold on this node before its calls answer 429. */
    clientUnsentBytesMax: e.CLIENT_UNSENT_BYTES_MAX,
    wakeRecheckMs: e.WAKE_RECHECK_SECONDS * 1000,
    statsCacheMs: e.STATS_CACHE_MS,
    /** A count, "auto" (resolved at start, realtime/admission.ts) or "off". */
    maxWaiters: e.MAX_WAITERS,
    /** Waiting recvs and statuses per seat on this node; one more answers the oldest. */
    maxWaitersPerSeat: e.MAX_WAITERS_PER_SEAT,
    /** Waiters per client address on this node: a count, "auto" (a share of the cap) or "off". */
    maxWaitersPerClient: e.MAX_WAITERS_PER_CLIENT,
    /** The longest a waiting MCP tool call holds its answer (MCP_MAX_WAIT_MS). */
    mcpMaxWaitMs: e.MCP_MAX_WAIT_MS,
    shutdownDrainMs: e.SHUTDOWN_DRAIN_SECONDS * 1000,
    keepAliveTimeoutMs: e.KEEP_ALIVE_TIMEOUT_SECONDS * 1000,
    headersTimeoutMs: Math.min(e.HEADERS_TIMEOUT_MS, e.KEEP_ALIVE_TIMEOUT_SECONDS * 1000 + 1000),
    requestTimeoutMs: e.REQUEST_TIMEOUT_MS,
    connectionCheckIntervalMs: e.CONNECTION_CHECK_INTERVAL_MS,
    listenBacklog: e.LISTEN_BACKLOG,
    logLevel: e.LOG_LEVEL,
  };
}

/** How to reach Redis: exactly one of url, clusterNodes, sentinel (the schema checks it). */
function redisSettingsFrom(e: z.infer<typeof ConfigSchema>) {
  return {
    url: e.REDIS_URL,
    clusterNodes: e.REDIS_CLUSTER_NODES,
    sentinel: e.REDIS_SENTINELS
      ? {
          sentinels: e.REDIS_SENTINELS,
          name: e.REDIS_SENTINEL_NAME!,
          username: e.REDIS_SENTINEL_USERNAME,
          password: e.REDIS_SENTINEL_PASSWORD,
          tls: e.REDIS_SENTINEL_TLS,
          /** "reported host:port" -> reachable address. */
          natMap: e.REDIS_SENTINEL_NAT_MAP,
        }
      : undefined,
    /** The data nodes' credentials and TLS (cluster and Sentinel; a URL carries its own). */
    username: e.REDIS_USERNAME,
    password: e.REDIS_PASSWORD,
    tls: e.REDIS_TLS,
    keyPrefix: e.REDIS_KEY_PREFIX,
    commandTimeoutMs: e.REDIS_COMMAND_TIMEOUT_MS,
    /** Replicas WAIT must confirm before a state change answers success (0: none; "all": every one the master has). */
    writeAckReplicas: e.REDIS_WRITE_ACK_REPLICAS,
    writeAckTimeoutMs: e.REDIS_WRITE_ACK_TIMEOUT_MS,
  };
}

/** Names of every environment variable the server reads (for infra checks). */
export const CONFIG_VARIABLES = Object.keys(ConfigSchema.shape) as (keyof typeof ConfigSchema.shape)[];

/**
 * The settings with every variable unset: the one source of a default for code that can run
 * without a Config (the recipe, the stores, the Redis helpers): they read it here rather than
 * repeat a number of ConfigSchema.
 */
export const CONFIG_DEFAULTS: Config = settingsFrom(ConfigSchema.parse({}));
/** The Redis settings' defaults (CONFIG_DEFAULTS has no Redis), as for one REDIS_URL. */
export const REDIS_DEFAULTS: RedisConfig = redisSettingsFrom(ConfigSchema.parse({}));
