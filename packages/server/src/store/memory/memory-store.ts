// The in-process store, used when REDIS_URL is not set so that `pnpm start` works on a fresh
// machine: the Redis store's code and its Lua scripts, run on a Lua VM (lua-vm.ts) against
// an in-memory keyspace (mini-redis.ts) instead of Redis. What only this store has: its
// total byte budget (MEMORY_STORE_MAX_BYTES), the bound on notes, and the sweep of expired
// keys (Redis has its own).
import { storeFullError } from "../../errors.js";
import { LocalWakeupBus } from "../../realtime/local-wakeups.js";
import { SCRIPTS, type ScriptName, type ScriptReply } from "../redis/scripts.js";
import type { RoomLifetimes, StoreBudget, WakeEvent } from "../room-store.js";
import type { Arg, ScriptBackend } from "../script-backend.js";
import { ScriptedRoomStore } from "../scripted-store.js";
import type { LuaVm } from "./lua-vm.js";
import { MiniRedis, type Reply } from "./mini-redis.js";

/** Most notes the in-process store keeps (a few hundred bytes each): they count in the budget, and are bounded by number too. */
const MAX_NOTES = 10_000;

/**
 * The least a growing script is counted for: a script may store more than its arguments
 * weigh (fields, keys, an ending record), so a small one must not slip into a full store.
 */
const MIN_GROWTH_BYTES = 512;

class MemoryBackend implements ScriptBackend {
  readonly kind = "memory" as const;
  readonly acknowledgesWrites = false;
  readonly keyspace: MiniRedis;
  /**
   * The process's one VM (lua-vm.ts), loaded on the first script: a relay on Redis never
   * loads it, and `pnpm start` answers sooner.
   */
  private vm?: Promise<LuaVm>;
  /** Wake-ups a script published, delivered once it has run (as Redis delivers them). */
  private readonly published: [channel: string, message: string][] = [];
  private readonly notes = new Set<string>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(
    now: () => number,
    private readonly wakeups: LocalWakeupBus,
    private readonly maxBytes: number,
  ) {
    this.keyspace = new MiniRedis(now, (channel, message) => this.published.push([channel, message]));
    // Expired keys are also dropped when touched; the sweep only frees their memory.
    this.sweeper = setInterval(() => this.keyspace.sweep(), 10_000);
    this.sweeper.unref();
  }

  async guard<T>(operation: () => Promise<T>): Promise<T> {
    return operation();
  }

  async script<N extends ScriptName>(name: N, args: Arg[]): Promise<ScriptReply<N>> {
    this.vm ??= import("./lua-vm.js").then(({ sharedLuaVm }) => sharedLuaVm());
    const vm = await this.vm;
    let reply: Reply;
    try {
      reply = vm.runOn(this.keyspace, name, args);
    } finally {
      this.deliver();
    }
    // The Lua VM answers what Redis would: the script's declared reply.
    return reply as ScriptReply<N>;
  }

  /**
   * A script that adds rooms or text is refused 507 when what it carries would pass the
   * budget: before it runs, as Redis refuses a script under maxmemory, so nothing is half done.
   */
  async change<N extends ScriptName>(name: N, args: Arg[]): Promise<ScriptReply<N>> {
    if (SCRIPTS[name].grows) {
      let bytes = 0;
      for (const arg of args) bytes += typeof arg === "string" ? Buffer.byteLength(arg, "utf8") : 8;
      if (this.keyspace.used + Math.max(bytes, MIN_GROWTH_BYTES) > this.maxBytes) throw storeFullError();
    }
    return this.script(name, args);
  }

  private deliver(): void {
    for (const [channel, message] of this.published.splice(0)) {
      const code = /:([^:]+):wake$/.exec(channel)?.[1];
      if (code !== undefined) this.wakeups.publish(code, message as WakeEvent);
    }
  }

  async hmget(key: string, ...fields: string[]): Promise<(string | null)[]> {
    return this.keyspace.hmget(key, fields);
  }
  async zrange(key: string, start: string, stop: string): Promise<string[]> {
    return this.keyspace.zrange(key, Number(start), Number(stop), false);
  }
  async zcount(key: string, min: string, max: string): Promise<number> {
    return this.keyspace.zcount(key, min, max);
  }
  async exists(key: string): Promise<number> {
    return this.keyspace.exists([key]);
  }
  async setWithExpiry(key: string, value: string, ttlMs: number): Promise<void> {
    if (!this.notes.has(key) && this.notes.size >= MAX_NOTES) {
      for (const held of this.notes) if (this.keyspace.exists([held]) === 0) this.notes.delete(held);
      // Still full: the oldest note goes first (a Set keeps insertion order).
      const oldest = this.notes.size >= MAX_NOTES ? this.notes.values().next().value : undefined;
      if (oldest !== undefined) {
        this.keyspace.del([oldest]);
        this.notes.delete(oldest);
      }
    }
    this.notes.delete(key);
    this.notes.add(key);
    this.keyspace.set(key, value, ttlMs);
  }
  async get(key: string): Promise<string | null> {
    return this.keyspace.get(key);
  }
  async ping(): Promise<string> {
    return "PONG";
  }
  async close(): Promise<void> {
    clearInterval(this.sweeper);
  }
}

export class MemoryRoomStore extends ScriptedRoomStore {
  constructor(lifetimes: RoomLifetimes, now: () => number = Date.now, budget: StoreBudget = {}) {
    const wakeups = new LocalWakeupBus();
    const backend = new MemoryBackend(now, wakeups, budget.maxBytes ?? Number.POSITIVE_INFINITY);
    super({ backend, wakeups, keyPrefix: "", lifetimes, budget });
  }
}
