// The in-process store's keyspace: the Redis commands the room scripts use, with Redis's
// replies and rules (an emptied hash or list is deleted with its TTL, PEXPIREAT in the past
// deletes, TTLs in milliseconds), so that the same Lua files run here as on Redis (lua-vm.ts).
// Expired keys are dropped when touched and by sweep(). It also counts the bytes it holds, for
// the in-process store's budget (MEMORY_STORE_MAX_BYTES).

import { formatDouble, strtod } from "./c-numbers.js";

/** A command's answer as Redis gives it: integer, bulk string, nil, or an array of them. */
export type Reply = number | string | null | Reply[];

export type Value =
  | { type: "string"; value: string }
  | { type: "hash"; value: Map<string, string> }
  | { type: "list"; value: string[] }
  | { type: "zset"; value: Map<string, number> };

interface ValueTypes {
  string: string;
  hash: Map<string, string>;
  list: string[];
  zset: Map<string, number>;
}
type ValueOf<T extends Value["type"]> = ValueTypes[T];

interface Entry {
  data: Value;
  /** ms since the epoch; absent: no expiry. */
  expiresAt?: number;
  /** Bytes the budget counts for this key (its name, its content, and their bookkeeping). */
  bytes: number;
}

// What the budget counts besides the bytes themselves: a key, a hash field or list item, a
// sorted-set member (its score and its place in the set), rounded up from what V8 spends.
const KEY_OVERHEAD = 64;
const ITEM_OVERHEAD = 16;
const MEMBER_OVERHEAD = 32;

const bytesOf = (text: string): number => Buffer.byteLength(text, "utf8");

export class CommandError extends Error {}

const wrongType = () => new CommandError("WRONGTYPE Operation against a key holding the wrong kind of value");
const invalidExpire = (name: string) => new CommandError(`ERR invalid expire time in '${name}' command`);
const wrongArgs = (name: string) =>
  new CommandError(`ERR wrong number of arguments for '${name.toLowerCase()}' command`);

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/** A 64-bit integer as Redis reads one (string2ll): no sign but '-', no leading zero, no space. */
function bigInteger(text: string, refusal = "ERR value is not an integer or out of range"): bigint {
  if (!/^(0|-?[1-9]\d*)$/.test(text)) throw new CommandError(refusal);
  const value = BigInt(text);
  if (value < INT64_MIN || value > INT64_MAX) throw new CommandError(refusal);
  return value;
}

function integer(text: string): number {
  return Number(bigInteger(text));
}

/** A score as ZADD reads it (string2d): all of the text a number, no leading space, no NaN, no overflow. */
function score(text: string): number {
  const { value, whole, range } = strtod(text);
  if (text === "" || /^[ \t\n\v\f\r]/.test(text) || !whole || range || Number.isNaN(value))
    throw new CommandError("ERR value is not a valid float");
  return value;
}

/** A sorted-set bound as Redis reads one (zslParseRange): "(" for exclusive, then strtod on the rest. */
function bound(text: string): { value: number; exclusive: boolean } {
  const exclusive = text.startsWith("(");
  const { value, whole } = strtod(exclusive ? text.slice(1) : text);
  if (!whole || Number.isNaN(value)) throw new CommandError("ERR min or max is not a float");
  return { value, exclusive };
}

/** A score as Redis writes it in a reply. */
const scoreText = formatDouble;

const sortedMembers = (set: Map<string, number>): [string, number][] =>
  [...set].sort(([ma, sa], [mb, sb]) => sa - sb || (ma < mb ? -1 : ma > mb ? 1 : 0));

export class MiniRedis {
  private readonly keys = new Map<string, Entry>();
  /** Bytes held, as the budget counts them. */
  used = 0;

  constructor(
    /** Milliseconds since the epoch, possibly with a fraction (TIME reads microseconds from it). */
    private readonly clock: () => number,
    /** SPUBLISH: channel and message, delivered by the caller once the script has run. */
    private readonly publish: (channel: string, message: string) => void,
  ) {}

  nowMs(): number {
    return Math.floor(this.clock());
  }

  /** Every live key: its type, value and expiry (ms since the epoch), for a test to compare with Redis's keyspace. */
  *dump(): Generator<[key: string, data: Value, expiresAt: number | undefined]> {
    for (const key of [...this.keys.keys()]) {
      const entry = this.live(key);
      if (entry) yield [key, entry.data, entry.expiresAt];
    }
  }

  /** Drops every expired key (expired keys are also dropped when a command touches them). */
  sweep(): void {
    const now = this.nowMs();
    for (const [key, entry] of this.keys) if (entry.expiresAt !== undefined && entry.expiresAt <= now) this.drop(key);
  }

  private drop(key: string): boolean {
    const entry = this.keys.get(key);
    if (!entry) return false;
    this.used -= entry.bytes;
    this.keys.delete(key);
    return true;
  }

  private live(key: string): Entry | undefined {
    const entry = this.keys.get(key);
    if (entry?.expiresAt !== undefined && entry.expiresAt <= this.nowMs()) {
      this.drop(key);
      return undefined;
    }
    return entry;
  }

  private read<T extends Value["type"]>(key: string, type: T): ValueOf<T> | undefined {
    const entry = this.live(key);
    if (!entry) return undefined;
    if (entry.data.type !== type) throw wrongType();
    return entry.data.value as unknown as ValueOf<T>;
  }

  /** The key's entry of this type, created empty when missing. */
  private write<T extends Value["type"]>(key: string, type: T): Entry & { data: Extract<Value, { type: T }> } {
    let entry = this.live(key);
    if (!entry) {
      const value = type === "string" ? "" : type === "list" ? [] : new Map();
      entry = { data: { type, value } as Value, bytes: KEY_OVERHEAD + bytesOf(key) };
      this.used += entry.bytes;
      this.keys.set(key, entry);
    } else if (entry.data.type !== type) throw wrongType();
    return entry as Entry & { data: Extract<Value, { type: T }> };
  }

  private grow(entry: Entry, bytes: number): void {
    entry.bytes += bytes;
    this.used += bytes;
  }

  /** Redis deletes a hash, list or sorted set once it is empty (and its TTL with it). */
  private dropIfEmpty(key: string, entry: Entry): void {
    const { data } = entry;
    const size = data.type === "list" ? data.value.length : data.type === "string" ? 1 : data.value.size;
    if (size === 0) this.drop(key);
  }

  private expireAt(key: string, atMs: number): number {
    const entry = this.live(key);
    if (!entry) return 0;
    if (atMs <= this.nowMs()) this.drop(key);
    else entry.expiresAt = atMs;
    return 1;
  }

  /** Runs one command (its name in any case, then its arguments as Redis receives them: strings). */
  call(name: string, args: string[]): Reply {
    const command = COMMANDS[name.toUpperCase()];
    if (!command) throw new CommandError(`ERR unknown command '${name}'`);
    if (args.length < command.arity) throw wrongArgs(name);
    return command.run(this, args);
  }

  // ---- the commands, grouped by type; each is named as in Redis.

  del(keys: string[]): number {
    return keys.filter((key) => this.live(key) !== undefined && this.drop(key)).length;
  }
  exists(keys: string[]): number {
    return keys.filter((key) => this.live(key) !== undefined).length;
  }
  pexpireat(key: string, atMs: number): number {
    return this.expireAt(key, atMs);
  }
  pexpire(key: string, ms: number): number {
    return this.expireAt(key, this.nowMs() + ms);
  }
  pttl(key: string): number {
    const entry = this.live(key);
    if (!entry) return -2;
    return entry.expiresAt === undefined ? -1 : entry.expiresAt - this.nowMs();
  }
  pexpiretime(key: string): number {
    const entry = this.live(key);
    if (!entry) return -2;
    return entry.expiresAt ?? -1;
  }
  time(): string[] {
    const micros = Math.floor(this.clock() * 1000);
    return [String(Math.floor(micros / 1_000_000)), String(micros % 1_000_000)];
  }

  set(key: string, value: string, px?: number): string {
    this.drop(key);
    const entry = this.write(key, "string");
    entry.data.value = value;
    this.grow(entry, bytesOf(value));
    if (px !== undefined) entry.expiresAt = this.nowMs() + px;
    return "OK";
  }
  get(key: string): string | null {
    return this.read(key, "string") ?? null;
  }

  hset(key: string, pairs: string[]): number {
    if (pairs.length === 0 || pairs.length % 2 !== 0) throw wrongArgs("hset");
    const entry = this.write(key, "hash");
    let added = 0;
    for (let i = 0; i < pairs.length; i += 2) {
      const field = pairs[i]!;
      const value = pairs[i + 1]!;
      const old = entry.data.value.get(field);
      if (old === undefined) {
        added++;
        this.grow(entry, ITEM_OVERHEAD + bytesOf(field) + bytesOf(value));
      } else this.grow(entry, bytesOf(value) - bytesOf(old));
      entry.data.value.set(field, value);
    }
    return added;
  }
  hget(key: string, field: string): string | null {
    return this.read(key, "hash")?.get(field) ?? null;
  }
  hmget(key: string, fields: string[]): (string | null)[] {
    const hash = this.read(key, "hash");
    return fields.map((field) => hash?.get(field) ?? null);
  }
  hexists(key: string, field: string): number {
    return this.read(key, "hash")?.has(field) ? 1 : 0;
  }
  hstrlen(key: string, field: string): number {
    const value = this.read(key, "hash")?.get(field);
    return value === undefined ? 0 : bytesOf(value);
  }
  hdel(key: string, fields: string[]): number {
    const hash = this.read(key, "hash");
    const entry = this.keys.get(key);
    if (!hash || !entry) return 0;
    let removed = 0;
    for (const field of fields) {
      const old = hash.get(field);
      if (old === undefined) continue;
      hash.delete(field);
      this.grow(entry, -(ITEM_OVERHEAD + bytesOf(field) + bytesOf(old)));
      removed++;
    }
    this.dropIfEmpty(key, entry);
    return removed;
  }
  /** In 64-bit integers, exactly, as Redis adds them (past 2^53 too). */
  hincrby(key: string, field: string, by: bigint): number {
    const old = this.read(key, "hash")?.get(field);
    const start = old === undefined ? 0n : bigInteger(old, "ERR hash value is not an integer");
    const next = start + by;
    if (next < INT64_MIN || next > INT64_MAX) throw new CommandError("ERR increment or decrement would overflow");
    this.hset(key, [field, String(next)]);
    return Number(next);
  }

  rpush(key: string, values: string[]): number {
    const entry = this.write(key, "list");
    for (const value of values) {
      entry.data.value.push(value);
      this.grow(entry, ITEM_OVERHEAD + bytesOf(value));
    }
    return entry.data.value.length;
  }
  llen(key: string): number {
    return this.read(key, "list")?.length ?? 0;
  }
  lrange(key: string, start: number, stop: number): string[] {
    const list = this.read(key, "list") ?? [];
    const from = start < 0 ? Math.max(0, list.length + start) : start;
    const to = stop < 0 ? list.length + stop : Math.min(stop, list.length - 1);
    return from > to ? [] : list.slice(from, to + 1);
  }
  /** LREM: the first `count` items equal to value from the head, from the tail when negative (0: all). */
  lrem(key: string, count: number, value: string): number {
    const list = this.read(key, "list");
    const entry = this.keys.get(key);
    if (!list || !entry) return 0;
    const limit = count === 0 ? Number.POSITIVE_INFINITY : Math.abs(count);
    let removed = 0;
    if (count >= 0) {
      for (let i = 0; i < list.length && removed < limit; ) {
        if (list[i] === value) {
          list.splice(i, 1);
          removed++;
        } else i++;
      }
    } else {
      for (let i = list.length - 1; i >= 0 && removed < limit; i--) {
        if (list[i] === value) {
          list.splice(i, 1);
          removed++;
        }
      }
    }
    this.grow(entry, -removed * (ITEM_OVERHEAD + bytesOf(value)));
    this.dropIfEmpty(key, entry);
    return removed;
  }

  zadd(key: string, pairs: string[]): number {
    if (pairs.length === 0 || pairs.length % 2 !== 0) throw new CommandError("ERR syntax error");
    // Every score is read before the key is touched: a refused ZADD changes nothing.
    const scores = pairs.filter((_, i) => i % 2 === 0).map(score);
    const entry = this.write(key, "zset");
    let added = 0;
    for (let i = 0; i < pairs.length; i += 2) {
      const score = scores[i / 2]! + 0; // -0 is stored as 0, as Redis stores it
      const member = pairs[i + 1]!;
      if (!entry.data.value.has(member)) {
        added++;
        this.grow(entry, MEMBER_OVERHEAD + bytesOf(member));
      }
      entry.data.value.set(member, score);
    }
    return added;
  }
  zrem(key: string, members: string[]): number {
    const set = this.read(key, "zset");
    const entry = this.keys.get(key);
    if (!set || !entry) return 0;
    let removed = 0;
    for (const member of members) {
      if (!set.delete(member)) continue;
      this.grow(entry, -(MEMBER_OVERHEAD + bytesOf(member)));
      removed++;
    }
    this.dropIfEmpty(key, entry);
    return removed;
  }
  zcard(key: string): number {
    return this.read(key, "zset")?.size ?? 0;
  }
  private inRange(min: string, max: string): (score: number) => boolean {
    const low = bound(min);
    const high = bound(max);
    return (score) =>
      (low.exclusive ? score > low.value : score >= low.value) &&
      (high.exclusive ? score < high.value : score <= high.value);
  }
  zcount(key: string, min: string, max: string): number {
    const within = this.inRange(min, max);
    let count = 0;
    for (const score of this.read(key, "zset")?.values() ?? []) if (within(score)) count++;
    return count;
  }
  // The range is read before the key, as Redis does: a bad bound is refused on a missing key too.
  zremrangebyscore(key: string, min: string, max: string): number {
    const within = this.inRange(min, max);
    const set = this.read(key, "zset");
    if (!set) return 0;
    return this.zrem(
      key,
      [...set].filter(([, score]) => within(score)).map(([member]) => member),
    );
  }
  zrange(key: string, start: number, stop: number, withScores: boolean): string[] {
    const members = sortedMembers(this.read(key, "zset") ?? new Map());
    const from = start < 0 ? Math.max(0, members.length + start) : start;
    const to = stop < 0 ? members.length + stop : Math.min(stop, members.length - 1);
    const picked = from > to ? [] : members.slice(from, to + 1);
    return picked.flatMap(([member, score]) => (withScores ? [member, scoreText(score)] : [member]));
  }

  spublish(channel: string, message: string): number {
    this.publish(channel, message);
    return 0;
  }
}

/** Each command: its least number of arguments, and how it runs on string arguments. */
const COMMANDS: Record<string, { arity: number; run: (redis: MiniRedis, a: string[]) => Reply }> = {
  DEL: { arity: 1, run: (r, a) => r.del(a) },
  EXISTS: { arity: 1, run: (r, a) => r.exists(a) },
  PEXPIRE: {
    arity: 2,
    run: (r, a) => {
      const ms = bigInteger(a[1]!);
      if (ms > INT64_MAX - BigInt(r.nowMs())) throw invalidExpire("pexpire");
      return r.pexpire(a[0]!, Number(ms));
    },
  },
  PEXPIREAT: { arity: 2, run: (r, a) => r.pexpireat(a[0]!, integer(a[1]!)) },
  PTTL: { arity: 1, run: (r, a) => r.pttl(a[0]!) },
  PEXPIRETIME: { arity: 1, run: (r, a) => r.pexpiretime(a[0]!) },
  TIME: { arity: 0, run: (r) => r.time() },
  PING: { arity: 0, run: () => "PONG" },
  SET: {
    arity: 2,
    run: (r, a) => {
      if (a.length === 2) return r.set(a[0]!, a[1]!);
      if (a.length === 4 && a[2]!.toUpperCase() === "PX") {
        const px = bigInteger(a[3]!);
        if (px <= 0n || px > INT64_MAX - BigInt(r.nowMs())) throw invalidExpire("set");
        return r.set(a[0]!, a[1]!, Number(px));
      }
      throw new CommandError("ERR syntax error");
    },
  },
  GET: { arity: 1, run: (r, a) => r.get(a[0]!) },
  HSET: { arity: 3, run: (r, a) => r.hset(a[0]!, a.slice(1)) },
  HGET: { arity: 2, run: (r, a) => r.hget(a[0]!, a[1]!) },
  HMGET: { arity: 2, run: (r, a) => r.hmget(a[0]!, a.slice(1)) },
  HEXISTS: { arity: 2, run: (r, a) => r.hexists(a[0]!, a[1]!) },
  HSTRLEN: { arity: 2, run: (r, a) => r.hstrlen(a[0]!, a[1]!) },
  HDEL: { arity: 2, run: (r, a) => r.hdel(a[0]!, a.slice(1)) },
  HINCRBY: { arity: 3, run: (r, a) => r.hincrby(a[0]!, a[1]!, bigInteger(a[2]!)) },
  RPUSH: { arity: 2, run: (r, a) => r.rpush(a[0]!, a.slice(1)) },
  LLEN: { arity: 1, run: (r, a) => r.llen(a[0]!) },
  LRANGE: { arity: 3, run: (r, a) => r.lrange(a[0]!, integer(a[1]!), integer(a[2]!)) },
  LREM: { arity: 3, run: (r, a) => r.lrem(a[0]!, integer(a[1]!), a[2]!) },
  ZADD: { arity: 3, run: (r, a) => r.zadd(a[0]!, a.slice(1)) },
  ZREM: { arity: 2, run: (r, a) => r.zrem(a[0]!, a.slice(1)) },
  ZCARD: { arity: 1, run: (r, a) => r.zcard(a[0]!) },
  ZCOUNT: { arity: 3, run: (r, a) => r.zcount(a[0]!, a[1]!, a[2]!) },
  ZREMRANGEBYSCORE: { arity: 3, run: (r, a) => r.zremrangebyscore(a[0]!, a[1]!, a[2]!) },
  ZRANGE: {
    arity: 3,
    run: (r, a) => {
      const withScores = a.length === 4 && a[3]!.toUpperCase() === "WITHSCORES";
      if (a.length > 3 && !withScores) throw new CommandError("ERR syntax error");
      return r.zrange(a[0]!, integer(a[1]!), integer(a[2]!), withScores);
    },
  },
  SPUBLISH: { arity: 2, run: (r, a) => r.spublish(a[0]!, a[1]!) },
};
