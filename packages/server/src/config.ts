// Configuration: parsed once, at start-up, from the environment. Nothing else in the
// server reads process.env. A bad value stops start-up with a message naming the variable.
import { z } from "zod";

const integer = (fallback: number, min: number, max = Number.MAX_SAFE_INTEGER) =>
  z
    .string()
    .trim()
    .regex(/^-?[0-9]+$/, "must be a whole number")
    .transform(Number)
    .pipe(z.number().int().min(min).max(max))
    .optional()
    .transform((value) => value ?? fallback);

const optionalText = z
  .string()
  .trim()
  .optional()
  .transform((value) => (value === "" ? undefined : value));

/** Express "trust proxy": false, a hop count, or a list of addresses/subnets. Never plain true. */
const trustProxy = z
  .string()
  .trim()
  .optional()
  .transform((value, ctx): false | number | string[] => {
    if (value === undefined || value === "" || value === "false" || value === "0") return false;
    if (/^[0-9]+$/.test(value)) return Number(value);
    if (value === "true") {
      ctx.addIssue({
        code: "custom",
        message: "'true' would trust any X-Forwarded-For a client sends; give the number of proxies in front (e.g. 1) or their addresses",
      });
      return z.NEVER;
    }
    return value.split(",").map((part) => part.trim()).filter(Boolean);
  });

const clusterNodes = z
  .string()
  .trim()
  .optional()
  .transform((value, ctx) => {
    if (!value) return undefined;
    return value.split(",").map((entry) => {
      const match = /^\s*([^\s:]+|\[[^\]]+\]):([0-9]{1,5})\s*$/.exec(entry);
      if (!match) {
        ctx.addIssue({ code: "custom", message: `"${entry}" is not host:port` });
        return { host: "", port: 0 };
      }
      return { host: match[1]!.replace(/^\[|\]$/g, ""), port: Number(match[2]) };
    });
  });

export const ConfigSchema = z
  .object({
    PORT: integer(8080, 0, 65535).describe("TCP port to listen on; `0` picks a free one."),
    HOST: optionalText.transform((v) => v ?? "127.0.0.1").describe("Address to listen on. Containers must set `0.0.0.0` (the image does)."),
    PUBLIC_URL: optionalText.pipe(z.url({ protocol: /^https?$/ }).optional()).transform((v) => v?.replace(/\/+$/, "")).describe("Public base URL, e.g. `https://duet.example.com`, for `join_url`, the share block and the recipe. Unset: taken from each request. Set it behind a load balancer."),
    TRUST_PROXY: trustProxy.describe("Proxies in front whose `X-Forwarded-For`/`-Proto` are honoured: their number (`1` behind one nginx or ingress-nginx) or their addresses/subnets, comma-separated (`10.0.0.0/8,127.0.0.1`). `true` is refused: it would let any client choose the IP its rate limit counts."),
    REDIS_URL: optionalText.pipe(z.url({ protocol: /^rediss?$/ }).optional()).describe("`redis://[:password@]host:6379[/db]` or `rediss://` (TLS). Unset, with `REDIS_CLUSTER_NODES` unset too: rooms live in process memory (one node only, lost on restart)."),
    REDIS_CLUSTER_NODES: clusterNodes.describe("Redis Cluster seed nodes, `host:port,host:port`, instead of `REDIS_URL` (never both)."),
    REDIS_KEY_PREFIX: optionalText.transform((v) => v ?? "duet:").describe("Prefix of every Redis key and channel; lets several installations share one Redis."),
    // 1.5 s: with the rate-limit count's own 500 ms bound, no call outlasts its wait by more
    // than about 2 s while Redis is silent.
    REDIS_COMMAND_TIMEOUT_MS: integer(1500, 50, 60_000).describe("A store call slower than this answers 503 `unavailable`, so no call outlasts its wait by more than about 2 s while Redis is silent."),
    ROOM_IDLE_SECONDS: integer(1800, 1, 86_400).describe("Idle lifetime: a room ends this long after its last authenticated call."),
    ROOM_MAX_SECONDS: integer(1800, 1, 86_400).describe("Hard lifetime: a room ends this long after open, whatever happens."),
    UA_POLICY: z.enum(["denylist", "off", "strict"]).optional().transform((v) => v ?? "denylist").describe("`denylist`: 403 for empty and generic library User-Agents on room calls; `strict`: only `duet/…`; `off`: any."),
    RATE_LIMIT_WINDOW_SECONDS: integer(60, 1, 86_400).describe("Window of the per-IP rate limits (shared by all nodes through Redis)."),
    RATE_LIMIT_REQUESTS: integer(600, 0).describe("Room calls and stats reads per IP per window; `0` turns the limit off."),
    RATE_LIMIT_ROOMS: integer(60, 0).describe("Opens and joins per IP per window, on top of the above; `0` turns the limit off."),
    WAKE_RECHECK_SECONDS: integer(150, 1, 3600).describe("A waiting recv or stream re-reads its inbox this often (±20 %) even without a wake-up: a last resort, since the heartbeat and the reconnect re-read already bound a lost wake-up. Long-polls wait at most 25 s, so at the default only streams ever re-read (0.4 times a minute)."),
    WAKE_HEARTBEAT_SECONDS: integer(10, 0, 3600).describe("On one Redis, each node proves its wake-up connection alive this often (one PING, whatever the number of waiters); unanswered within `REDIS_COMMAND_TIMEOUT_MS`, the connection is replaced and every waiter re-reads. `0` turns it off."),
    STATS_CACHE_MS: integer(1000, 0, 60_000).describe("`/v1/stats` and the relay-wide metrics are read from the store at most this often per node (on Redis each read is 2,048 pipelined commands)."),
    SHUTDOWN_DRAIN_SECONDS: integer(10, 0, 600).describe("On SIGTERM: readiness turns 503, waiting recvs answer at once, and in-flight calls get this long to finish before connections are cut."),
    KEEP_ALIVE_TIMEOUT_SECONDS: integer(65, 1, 3600).describe("Idle keep-alive of client connections; keep it above the load balancer's upstream idle timeout."),
    LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).optional().transform((v) => v ?? "info").describe("`fatal`, `error`, `warn`, `info`, `debug`, `trace` or `silent`."),
  })
  .superRefine((env, ctx) => {
    if (env.REDIS_URL && env.REDIS_CLUSTER_NODES) {
      ctx.addIssue({ code: "custom", path: ["REDIS_CLUSTER_NODES"], message: "set REDIS_URL or REDIS_CLUSTER_NODES, not both" });
    }
  });

/** The server's settings, in the units the code uses. */
export interface Config {
  port: number;
  host: string;
  publicUrl?: string;
  trustProxy: false | number | string[];
  redis?: { url?: string; clusterNodes?: { host: string; port: number }[]; keyPrefix: string; commandTimeoutMs: number };
  roomIdleMs: number;
  roomMaxMs: number;
  userAgentPolicy: "denylist" | "off" | "strict";
  rateLimit: { windowMs: number; requestsPerWindow: number; roomsPerWindow: number };
  wakeRecheckMs: number;
  wakeHeartbeatMs: number;
  statsCacheMs: number;
  shutdownDrainMs: number;
  keepAliveTimeoutMs: number;
  logLevel: string;
}

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
    throw new ConfigError(parsed.error.issues.map((issue) => `${issue.path.join(".") || "environment"}: ${issue.message}`));
  }
  const e = parsed.data;
  const onRedis = e.REDIS_URL !== undefined || e.REDIS_CLUSTER_NODES !== undefined;
  return {
    port: e.PORT,
    host: e.HOST,
    publicUrl: e.PUBLIC_URL,
    trustProxy: e.TRUST_PROXY,
    redis: onRedis
      ? { url: e.REDIS_URL, clusterNodes: e.REDIS_CLUSTER_NODES, keyPrefix: e.REDIS_KEY_PREFIX, commandTimeoutMs: e.REDIS_COMMAND_TIMEOUT_MS }
      : undefined,
    roomIdleMs: e.ROOM_IDLE_SECONDS * 1000,
    roomMaxMs: e.ROOM_MAX_SECONDS * 1000,
    userAgentPolicy: e.UA_POLICY,
    rateLimit: {
      windowMs: e.RATE_LIMIT_WINDOW_SECONDS * 1000,
      requestsPerWindow: e.RATE_LIMIT_REQUESTS,
      roomsPerWindow: e.RATE_LIMIT_ROOMS,
    },
    wakeRecheckMs: e.WAKE_RECHECK_SECONDS * 1000,
    wakeHeartbeatMs: e.WAKE_HEARTBEAT_SECONDS * 1000,
    statsCacheMs: e.STATS_CACHE_MS,
    shutdownDrainMs: e.SHUTDOWN_DRAIN_SECONDS * 1000,
    keepAliveTimeoutMs: e.KEEP_ALIVE_TIMEOUT_SECONDS * 1000,
    logLevel: e.LOG_LEVEL,
  };
}

/** Names of every environment variable the server reads (for infra checks). */
export const CONFIG_VARIABLES = Object.keys(ConfigSchema.shape) as (keyof typeof ConfigSchema.shape)[];
