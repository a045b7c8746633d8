// The per-IP request limit counted on the node and shared through Redis in batches: a call
// costs a Map update, not a Redis round trip. Every RATE_LIMIT_SYNC_MS each node adds the
// hits it counted since its last sync to the window's shared counts (count-hits-1.lua, one
// script call per window for every address the node saw) and learns the totals of every
// node. How exact that is (docs/security.md): a client spreading its calls over N nodes can
// get through at most what those nodes admit in one sync interval (plus one round trip)
// beyond the limit, since each node admits against the last shared total plus its own
// hits. Opens and joins keep the exact store (FailOpenRedisRateLimitStore): their budget
// bounds code guessing.
import type { ClientRateLimitInfo, Options, Store } from "express-rate-limit";
import { within } from "../deadline.js";
import type { RedisKeys } from "../store/redis/keys.js";
import type { RedisClient } from "../store/redis/connection.js";
import { scriptSource } from "../store/redis/scripts.js";

interface Count {
  /** Hits of every node in this window as Redis last answered, this node's synced ones included. */
  shared: number;
  /** This node's hits not yet added to Redis (or on their way). */
  pending: number;
}

interface Window {
  start: number;
  counts: Map<string, Count>;
}

type CountHits = (key: string, ...args: (string | number)[]) => Promise<number[]>;

export class SyncedRedisRateLimitStore implements Store {
  readonly localKeys = false;
  readonly prefix: string;
  private windowMs = 60_000;
  /** Addresses at half their budget or more are refreshed by every sync, with or without new hits here. */
  private watchFrom = Number.POSITIVE_INFINITY;
  private current?: Window;
  /** The window before the current one, while its last hits are still to be synced. */
  private previous?: Window;
  private timer?: NodeJS.Timeout;
  private syncing?: Promise<void>;
  private readonly countHits: CountHits;

  /**
   * @param syncMs how often the node's hits go to Redis (RATE_LIMIT_SYNC_MS)
   * @param timeoutMs longest wait for one sync; a sync that fails or times out keeps its
   * hits for the next one (the limit holds per node meanwhile: calls never wait for Redis)
   */
  constructor(
    client: RedisClient,
    private readonly keys: RedisKeys,
    private readonly name: string,
    private readonly syncMs: number,
    private readonly timeoutMs = 1000,
    private readonly now: () => number = Date.now,
  ) {
    this.prefix = keys.rateLimit(name);
    const { lua, numberOfKeys } = scriptSource("duetCountHits");
    const commands = client as unknown as { duetCountHits?: CountHits };
    if (typeof commands.duetCountHits !== "function") client.defineCommand("duetCountHits", { numberOfKeys, lua });
    this.countHits = (key, ...args) => (client as unknown as { duetCountHits: CountHits }).duetCountHits(key, ...args);
  }

  init(options: Options): void {
    this.windowMs = options.windowMs;
    if (typeof options.limit === "number" && options.limit > 0) this.watchFrom = options.limit / 2;
    this.timer ??= setInterval(() => void this.sync(), this.syncMs).unref();
  }

  private window(): Window {
    const start = Math.floor(this.now() / this.windowMs) * this.windowMs;
    if (this.current?.start !== start) {
      if (this.current && this.current.start < start) this.previous = this.current;
      this.current = { start, counts: new Map() };
    }
    return this.current;
  }

  increment(key: string): ClientRateLimitInfo {
    const window = this.window();
    let count = window.counts.get(key);
    if (!count) {
      count = { shared: 0, pending: 0 };
      window.counts.set(key, count);
    }
    count.pending++;
    return { totalHits: count.shared + count.pending, resetTime: new Date(window.start + this.windowMs) };
  }

  get(key: string): ClientRateLimitInfo | undefined {
    const window = this.window();
    const count = window.counts.get(key);
    return count && { totalHits: count.shared + count.pending, resetTime: new Date(window.start + this.windowMs) };
  }

  decrement(key: string): void {
    const count = this.window().counts.get(key);
    if (count) count.pending--;
  }

  resetKey(key: string): void {
    this.current?.counts.delete(key);
    this.previous?.counts.delete(key);
  }

  /** Sends the hits counted since the last sync (one script call per window); never throws. */
  sync(): Promise<void> {
    this.syncing ??= this.syncNow().finally(() => (this.syncing = undefined));
    return this.syncing;
  }

  private async syncNow(): Promise<void> {
    this.window();
    const windows = [this.previous, this.current].filter((w): w is Window => w !== undefined);
    this.previous = undefined;
    await Promise.all(windows.map((w) => this.syncWindow(w)));
  }

  private async syncWindow(window: Window): Promise<void> {
    const sent: [Count, number][] = [];
    const args: (string | number)[] = [window.start + this.windowMs * 2 - this.now()];
    for (const [key, count] of window.counts) {
      // An address near its limit is read back even when this node saw no new call from it,
      // so that the next call here meets what the other nodes counted meanwhile.
      if (count.pending === 0 && count.shared < this.watchFrom) continue;
      sent.push([count, count.pending]);
      args.push(key, count.pending);
    }
    if (sent.length === 0) return;
    for (const [count, hits] of sent) {
      count.shared += hits;
      count.pending -= hits;
    }
    try {
      const totals = await within(
        this.countHits(this.keys.rateLimitWindow(this.name, window.start), ...args),
        this.timeoutMs,
        () => {
          throw new Error("rate-limit sync timed out");
        },
        { unref: true },
      );
      sent.forEach(([count], i) => {
        // Hits counted while the sync was on its way stay pending on top of the new total.
        count.shared = Math.max(count.shared, Number(totals[i]));
      });
    } catch {
      // Redis is away: the hits go with the next sync. The local count still limits this node.
      for (const [count, hits] of sent) {
        count.shared -= hits;
        count.pending += hits;
      }
      if (window !== this.current && window.start + this.windowMs * 2 > this.now()) this.previous ??= window;
    }
  }

  /** Stops syncing, after one last sync (shutdown). */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.sync();
  }
}
