// The per-IP request limit (RATE_LIMIT_REQUESTS) on Redis: one budget for every node with no
// round trip per call. A node admits a call only with a token it holds and takes tokens from
// the window's budget in leases (lease-tokens-1.lua, at most what is left), growing from 1 to
// maxLease (1 % of the limit); without Redis it falls back to its own count and charges those
// calls later. The bounds and the lease rules: docs/security.md, "Rate limits". Opens and
// joins keep the exact store (FailOpenRedisRateLimitStore): their budget bounds code guessing.
import type { ClientRateLimitInfo, Options, Store } from "express-rate-limit";
import { CONFIG_DEFAULTS } from "../config.js";
import { within } from "../deadline.js";
import type { RedisKeys } from "../store/redis/keys.js";
import type { RedisClient } from "../store/redis/connection.js";
import { type ScriptReply, scriptSource } from "../store/redis/scripts.js";

type Answer = (admitted: boolean) => void;

interface Entry {
  /** Tokens leased to this node and not spent yet. */
  held: number;
  /** Calls this node admitted in the window, with a token or without. */
  admitted: number;
  /** Calls admitted without a token (Redis did not answer), not charged to the shared budget yet. */
  charge: number;
  /** Tokens the node keeps in hand for this address: the next lease tops them up to this. */
  lease: number;
  /** Tokens beyond the calls waiting asked for by lease calls on their way. */
  coming: number;
  /** Calls taken from the budget by every node, as Redis last answered. */
  taken: number;
  /** Nothing is left of the budget in this window. */
  spent: boolean;
  /** Lease calls for this address on their way. */
  asking: number;
  /** Calls waiting for a token, not yet in a lease call. */
  waiting: Answer[];
}

interface Window {
  start: number;
  entries: Map<string, Entry>;
  /** Addresses for the next lease call, sent on the next turn of the event loop. */
  queued: Map<string, Entry>;
}

type LeaseTokens = (key: string, ...args: (string | number)[]) => Promise<ScriptReply<"duetLeaseTokens">>;

const TIMEOUT = Symbol("timeout");

export class LeasedRedisRateLimitStore implements Store {
  readonly localKeys = false;
  readonly prefix: string;
  private windowMs = 60_000;
  private limit = Number.POSITIVE_INFINITY;
  private maxLease = 1;
  private current?: Window;
  /** A lease call failed or timed out and none has answered since: calls do not wait for Redis. */
  private unreachable = false;
  /** Lease calls on their way (close waits for them). */
  private readonly calls = new Set<Promise<unknown>>();
  /** Stopping: no more lease calls. */
  private closed = false;
  private readonly leaseTokens: LeaseTokens;

  /**
   * @param timeoutMs longest wait for a lease when the node holds no token; past it (or on an
   * error) the node counts alone until Redis answers again (RATE_LIMIT_REDIS_TIMEOUT_MS,
   * docs/security.md, "Rate limits")
   * @param maxLease largest lease, in tokens (default: 1 % of the limit, at least 1)
   */
  constructor(
    private readonly client: RedisClient,
    private readonly keys: RedisKeys,
    private readonly name: string,
    private readonly timeoutMs = CONFIG_DEFAULTS.rateLimit.redisTimeoutMs,
    private readonly now: () => number = Date.now,
    private readonly maxLeaseSetting?: number,
  ) {
    this.prefix = keys.rateLimit(name);
    const { lua, numberOfKeys } = scriptSource("duetLeaseTokens");
    // A client of the store has it already (defineScripts); the typing says every client has.
    if (typeof (client.duetLeaseTokens as unknown) !== "function")
      client.defineCommand("duetLeaseTokens", { numberOfKeys, lua });
    this.leaseTokens = (key, ...args) => client.duetLeaseTokens(key, ...args);
  }

  init(options: Options): void {
    this.windowMs = options.windowMs;
    if (typeof options.limit === "number" && options.limit > 0) this.limit = options.limit;
    this.maxLease = Math.max(1, this.maxLeaseSetting ?? Math.floor(this.limit / 100));
  }

  private window(): Window {
    const start = Math.floor(this.now() / this.windowMs) * this.windowMs;
    // The last window's leases go with it: its budget no longer counts.
    if (this.current?.start !== start) this.current = { start, entries: new Map(), queued: new Map() };
    return this.current;
  }

  private entry(window: Window, key: string): Entry {
    let entry = window.entries.get(key);
    if (!entry) {
      entry = {
        held: 0,
        admitted: 0,
        charge: 0,
        lease: 1,
        coming: 0,
        taken: 0,
        spent: false,
        asking: 0,
        waiting: [],
      };
      window.entries.set(key, entry);
    }
    return entry;
  }

  increment(key: string): ClientRateLimitInfo | Promise<ClientRateLimitInfo> {
    const window = this.window();
    const entry = this.entry(window, key);
    if (entry.held > 0) {
      entry.held--;
      return this.admit(window, key, entry);
    }
    if (entry.spent) return this.refuse(window);
    if (this.unreachable || this.closed || this.client.status !== "ready") {
      // Counted alone; the lease call carries the charge and tells when Redis is back.
      const answer = this.alone(window, entry);
      if (entry.asking === 0) this.queue(window, key, entry);
      return answer;
    }
    return new Promise<ClientRateLimitInfo>((resolve) => {
      // Counted as admitted by the lease call's answer, before this runs.
      entry.waiting.push((admitted) => resolve(admitted ? this.info(window, entry) : this.refuse(window)));
      this.queue(window, key, entry);
    });
  }

  /** A call admitted with a token; asks for the next lease once what is held runs low. */
  private admit(window: Window, key: string, entry: Entry): ClientRateLimitInfo {
    entry.admitted++;
    if (!entry.spent && entry.asking === 0 && entry.held <= entry.lease / 2) this.queue(window, key, entry);
    return this.info(window, entry);
  }

  /** Without Redis: the node's own count against the limit, charged to the budget later. */
  private alone(window: Window, entry: Entry): ClientRateLimitInfo {
    if (entry.admitted >= this.limit) return this.refuse(window);
    entry.admitted++;
    entry.charge++;
    return this.info(window, entry);
  }

  private info(window: Window, entry: Entry): ClientRateLimitInfo {
    // What all nodes have used, as far as this node knows: the budget taken less its own unspent tokens.
    const used = Math.min(this.limit, Math.max(1, entry.admitted, entry.taken - entry.held));
    return { totalHits: used, resetTime: new Date(window.start + this.windowMs) };
  }

  private refuse(window: Window): ClientRateLimitInfo {
    return { totalHits: this.limit + 1, resetTime: new Date(window.start + this.windowMs) };
  }

  private queue(window: Window, key: string, entry: Entry): void {
    if (window.queued.has(key) || this.closed) return;
    if (window.queued.size === 0) setImmediate(() => void this.lease(window));
    window.queued.set(key, entry);
    entry.asking++;
  }

  /** One lease call for every address queued in this turn. */
  private async lease(window: Window): Promise<void> {
    const asked = [...window.queued].map(([key, entry]) => {
      const waiting = entry.waiting.splice(0);
      // Tokens in hand and on their way stay within one lease: what a node can hold unused.
      const extra = Math.max(0, entry.lease - entry.held - entry.coming);
      const item = { entry, waiting, extra, charge: entry.charge, wanted: waiting.length + extra };
      entry.coming += extra;
      entry.charge = 0;
      entry.lease = Math.min(this.maxLease, entry.lease * 2);
      return [key, item] as const;
    });
    window.queued.clear();
    const args: (string | number)[] = [window.start + this.windowMs * 2 - this.now(), this.limit];
    for (const [key, { charge, wanted }] of asked) args.push(key, charge, wanted);
    let answered = false;
    const call = (async () => {
      // No offline queue: a connection that is down refuses at once.
      if (this.client.status !== "ready") throw new Error("redis not ready");
      if (this.closed) throw new Error("rate limit closed");
      return this.leaseTokens(this.keys.rateLimitWindow(this.name, window.start), ...args);
    })();
    this.calls.add(call);
    void call.catch(() => undefined).finally(() => this.calls.delete(call));
    call.then(
      (replies) => {
        answered = true;
        this.unreachable = false;
        asked.forEach(([, { entry, waiting, wanted, extra }], i) => {
          entry.asking--;
          entry.coming -= extra;
          const granted = Number(replies[2 * i]);
          entry.taken = Math.max(entry.taken, Number(replies[2 * i + 1]));
          if (granted < wanted || entry.taken >= this.limit) entry.spent = true;
          // Calls still waiting (this call did not time out) take theirs first.
          const served = waiting.splice(0, granted);
          entry.admitted += served.length;
          entry.held += granted - served.length;
          for (const answer of served) answer(true);
          for (const answer of waiting.splice(0)) answer(false);
        });
      },
      () => {
        answered = true;
        this.unreachable = true;
        for (const [, item] of asked) {
          item.entry.asking--;
          item.entry.coming -= item.extra;
          // Not charged: it goes with the next call.
          item.entry.charge += item.charge;
          this.fallBack(window, item.entry, item.waiting);
        }
      },
    );
    if ((await within(call, this.timeoutMs, () => TIMEOUT, { unref: true }).catch(() => undefined)) !== TIMEOUT) return;
    if (answered) return;
    // Redis is slow or away: the calls waiting are counted by the node alone, and the next
    // calls do not wait. Tokens the call still brings are kept; its charge counts once it answers.
    this.unreachable = true;
    for (const [, { entry, waiting }] of asked) this.fallBack(window, entry, waiting);
  }

  private fallBack(window: Window, entry: Entry, waiting: Answer[]): void {
    for (const answer of waiting.splice(0)) answer(this.alone(window, entry).totalHits <= this.limit);
  }

  get(key: string): ClientRateLimitInfo | undefined {
    const window = this.window();
    const entry = window.entries.get(key);
    return entry && this.info(window, entry);
  }

  /** A call that no longer counts (express-rate-limit's skip options; unused here): its token comes back. */
  decrement(key: string): void {
    const entry = this.window().entries.get(key);
    if (!entry || entry.admitted === 0) return;
    entry.admitted--;
    if (entry.charge > 0) entry.charge--;
    else entry.held++;
  }

  resetKey(key: string): void {
    this.current?.entries.delete(key);
  }

  /**
   * Shutdown: hands the tokens this node holds back to the window's budget and charges the
   * calls it admitted alone, in one call bounded by timeoutMs; never throws.
   */
  async close(): Promise<void> {
    this.closed = true;
    await within(Promise.allSettled(this.calls), this.timeoutMs, () => undefined, { unref: true });
    const window = this.current;
    if (!window || this.client.status !== "ready") return;
    const args: (string | number)[] = [window.start + this.windowMs * 2 - this.now(), this.limit];
    for (const [key, entry] of window.entries) {
      const charge = entry.charge - entry.held;
      if (charge !== 0) args.push(key, charge, 0);
      entry.held = 0;
      entry.charge = 0;
    }
    if (args.length === 2) return;
    await within(
      this.leaseTokens(this.keys.rateLimitWindow(this.name, window.start), ...args),
      this.timeoutMs,
      () => undefined,
      { unref: true },
    ).catch(() => undefined);
  }
}
