// Per-IP rate limits (express-rate-limit), counted in Redis when the relay runs on Redis so
// that every node shares one count. Two budgets: all room calls, and the stricter one for
// open and join (a join is a guess at a code).
import type { Request, RequestHandler } from "express";
import { ipKeyGenerator, rateLimit, type ClientRateLimitInfo, type Options, type Store } from "express-rate-limit";
import { RedisStore, type RedisReply } from "rate-limit-redis";
import { Cluster } from "ioredis";
import { within } from "../deadline.js";
import { ApiError } from "../errors.js";
import type { RedisClient } from "../store/redis/connection.js";
import { CONFIG_DEFAULTS } from "../config.js";

export interface RateLimitSettings {
  windowMs: number;
  /** 0 disables the limit. */
  limit: number;
  name: string;
}

/**
 * Connections on which a rate-limit count timed out. Their limiters let calls through at
 * once, counting in the background, until a count comes back: a silent Redis then costs a
 * request one store timeout, not one more per limiter on its way.
 */
const suspended = new WeakSet<object>();

/**
 * The rate-limit store on Redis, failing open: while Redis is unreachable a request is let
 * through (the call itself then answers 503), and the store is rebuilt once Redis is back
 * (rate-limit-redis loads its script once, at construction, and never retries that load).
 */
export class FailOpenRedisRateLimitStore implements Store {
  private inner?: Store;
  private options?: Options;
  readonly localKeys = false;

  /**
   * @param timeoutMs longest wait for a count before letting the call through
   * (RATE_LIMIT_REDIS_TIMEOUT_MS): a healthy Redis answers in a few ms, and
   * the call itself still answers 503 within the command timeout when Redis is gone.
   */
  constructor(
    private readonly client: RedisClient,
    readonly prefix: string,
    private readonly timeoutMs = CONFIG_DEFAULTS.rateLimit.redisTimeoutMs,
  ) {}

  init(options: Options): void {
    this.options = options;
  }

  private current(): Store | undefined {
    if (!this.inner && this.client.status === "ready") {
      const store = buildRedisStore(this.client, this.prefix);
      this.inner = store;
      // init loads the scripts (async): a failure must drop this store, never go unhandled.
      if (this.options) {
        void Promise.resolve(store.init?.(this.options)).catch(() => {
          if (this.inner === store) this.inner = undefined;
        });
      }
    }
    return this.inner;
  }

  private letThrough(): ClientRateLimitInfo {
    return { totalHits: 0, resetTime: new Date(Date.now() + (this.options?.windowMs ?? 60_000)) };
  }

  async increment(key: string): Promise<ClientRateLimitInfo> {
    const store = this.current();
    if (!store) return this.letThrough();
    const counted = Promise.resolve(store.increment(key));
    if (suspended.has(this.client)) {
      counted.then(
        () => suspended.delete(this.client),
        () => undefined,
      );
      return this.letThrough();
    }
    counted.catch(() => undefined);
    try {
      const result = await within(counted, this.timeoutMs, () => "timeout" as const);
      if (result !== "timeout") return result;
      suspended.add(this.client);
      return this.letThrough();
    } catch {
      this.inner = undefined;
      return this.letThrough();
    }
  }

  async decrement(key: string): Promise<void> {
    await this.current()
      ?.decrement(key)
      ?.catch(() => undefined);
  }

  async resetKey(key: string): Promise<void> {
    await this.current()
      ?.resetKey(key)
      ?.catch(() => undefined);
  }
}

/** A rate-limit-redis store on our connection, with the cluster fix for SCRIPT LOAD. */
function buildRedisStore(client: RedisClient, prefix: string): Store {
  if (client instanceof Cluster) {
    return new RedisStore({
      prefix,
      // SCRIPT LOAD has no key, so on a cluster it would reach one random node and the later
      // EVALSHA would fail with NOSCRIPT elsewhere: load it on every master instead.
      sendCommandCluster: async ({ command: [name, ...args] }) =>
        (name!.toUpperCase() === "SCRIPT"
          ? (await Promise.all(client.nodes("master").map((node) => node.call(name!, ...args))))[0]
          : await client.call(name!, ...args)) as RedisReply,
    });
  }
  return new RedisStore({
    prefix,
    sendCommand: (name: string, ...args: string[]) => client.call(name, ...args) as Promise<RedisReply>,
  });
}

export function rateLimiter(settings: RateLimitSettings, store?: Store): RequestHandler {
  if (settings.limit <= 0) return (_req, _res, next) => next();
  return rateLimit({
    windowMs: settings.windowMs,
    limit: settings.limit,
    standardHeaders: "draft-8",
    legacyHeaders: false,
    identifier: settings.name,
    store,
    // Fail open: when Redis is down the call itself answers 503, and a limiter that failed
    // closed would only turn that into 429s.
    passOnStoreError: true,
    // Its checks print multi-line stack traces to stderr (the first X-Forwarded-For without
    // TRUST_PROXY printed two), and the relay's logs are JSON lines. What they check is the
    // configuration, which config.ts and the rate-limit tests hold instead.
    validate: false,
    handler: (req, _res, next) => {
      const resetTime = (req as { rateLimit?: { resetTime?: Date } }).rateLimit?.resetTime;
      const error = new ApiError("rate_limited");
      error.retryAfterSeconds = Math.max(
        1,
        Math.ceil(((resetTime?.getTime() ?? Date.now() + settings.windowMs) - Date.now()) / 1000),
      );
      next(error);
    },
  });
}

/** The caller's address as the limits count it: its IP, an IPv6 one by its /56 (express-rate-limit's key). */
export const clientKey = (req: Request): string => ipKeyGenerator(req.ip ?? "");
