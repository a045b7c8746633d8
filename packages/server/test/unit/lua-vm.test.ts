// The in-process store's engine on its own: the keyspace keeps Redis's rules where the
// scripts depend on them, and the real room scripts run on the Lua VM with Redis's number
// and reply conversions (Lua 5.1's doubles, not fengari's 32-bit integers).
import { LuaVm, ScriptError, sharedLuaVm } from "../../src/store/memory/lua-vm";
import { MiniRedis } from "../../src/store/memory/mini-redis";
import { RedisKeys } from "../../src/store/redis/keys";
import { fieldsOf, type NamedReply } from "../../src/store/redis/scripts";

function engine(startMs = 1_764_000_000_000) {
  let now = startMs;
  const published: [string, string][] = [];
  const redis = new MiniRedis(
    () => now,
    (channel, message) => published.push([channel, message]),
  );
  return { redis, vm: new LuaVm(redis), published, advance: (ms: number) => (now += ms) };
}

describe("MiniRedis", () => {
  it("deletes an emptied list or hash with its TTL, and a key expired in the past", () => {
    const { redis, advance } = engine();
    redis.call("RPUSH", ["l", "x"]);
    redis.call("PEXPIRE", ["l", "1000"]);
    expect(redis.call("PTTL", ["l"])).toBe(1000);
    redis.call("LREM", ["l", "1", "x"]);
    expect(redis.call("EXISTS", ["l"])).toBe(0);
    redis.call("RPUSH", ["l", "y"]);
    expect(redis.call("PTTL", ["l"])).toBe(-1);
    redis.call("HSET", ["h", "f", "v"]);
    redis.call("PEXPIREAT", ["h", String(1_764_000_000_000 - 1)]);
    expect(redis.call("EXISTS", ["h"])).toBe(0);
    redis.call("HSET", ["h", "f", "v"]);
    redis.call("PEXPIRE", ["h", "50"]);
    advance(50);
    expect(redis.call("HGET", ["h", "f"])).toBeNull();
    expect(redis.call("PTTL", ["h"])).toBe(-2);
  });

  it("answers as Redis does: byte lengths, sorted members with their scores, wrong types refused", () => {
    const { redis } = engine();
    redis.call("HSET", ["h", "t", "héllo"]);
    expect(redis.call("HSTRLEN", ["h", "t"])).toBe(6);
    redis.call("ZADD", ["z", "20", "b", "10", "c", "10", "a"]);
    expect(redis.call("ZRANGE", ["z", "0", "0", "WITHSCORES"])).toEqual(["a", "10"]);
    expect(redis.call("ZCOUNT", ["z", "(10", "+inf"])).toBe(1);
    expect(redis.call("ZREMRANGEBYSCORE", ["z", "-inf", "10"])).toBe(2);
    expect(() => redis.call("LLEN", ["h"])).toThrow(/WRONGTYPE/);
    expect(() => redis.call("NOPE", [])).toThrow(/unknown command/);
  });

  it("counts the bytes it holds, and gives them back when keys go", () => {
    const { redis, advance } = engine();
    redis.call("HSET", ["h", "f", "x".repeat(1000)]);
    redis.call("RPUSH", ["l", "a", "b"]);
    redis.call("SET", ["n", "v", "PX", "10"]);
    expect(redis.used).toBeGreaterThan(1000);
    redis.call("DEL", ["h", "l"]);
    advance(10);
    redis.sweep();
    expect(redis.used).toBe(0);
  });
});

describe("the room scripts on the Lua VM", () => {
  const keys = new RedisKeys("");
  // Long enough for ids past 2^31 microseconds (36 minutes) in a live room.
  const IDLE = 10_000_000;
  const code = "abcdefghjkmn";
  const room = keys.room(code);
  const open = (vm: LuaVm) =>
    vm.run("duetOpen", [...room, keys.tallyFor(code), "hash-a", IDLE, 2 * IDLE, 600_000, "0"]);
  const send = (vm: LuaVm, text: string, key = "") =>
    vm.run("duetSend", [
      ...room,
      keys.tallyFor(code),
      "hash-a",
      IDLE,
      text,
      key,
      key === "" ? "" : "digest",
      100,
      1_000_000,
      keys.wakeChannel(code),
      "0",
    ]) as NamedReply;

  it("mint ids in microseconds past 2^31 exactly, as digits, and answer integers", () => {
    const { vm, advance } = engine();
    expect(open(vm)).toBe(IDLE);
    advance(5000.5);
    const first = fieldsOf(send(vm, "one"));
    expect(first).toEqual({ id: "5000500", replayed: 0, expires_in: IDLE });
    advance(4_000_000);
    expect(fieldsOf(send(vm, "two")).id).toBe("4005000500");
    expect(fieldsOf(send(vm, "three")).id).toBe("4005000501");
  });

  it("count text in bytes, replay a key, and publish the wake-up", () => {
    const { vm, redis, published } = engine();
    open(vm);
    vm.run("duetJoin", [...room, keys.tallyFor(code), "hash-b", 60_000, keys.wakeChannel(code)]);
    const sent = fieldsOf(send(vm, "héllo", "k"));
    expect(redis.call("HGET", [room[0], "bytes"])).toBe("6");
    expect(fieldsOf(send(vm, "héllo", "k"))).toMatchObject({ id: sent.id, replayed: 1 });
    expect(published).toEqual([
      [keys.wakeChannel(code), "joined"],
      [keys.wakeChannel(code), "b"],
    ]);
    const inbox = fieldsOf(vm.run("duetRecv", [...room, "hash-b", 60_000, "1"]) as NamedReply);
    expect(inbox.messages).toEqual([sent.id, "héllo"]);
    expect(vm.run("duetRecv", [...room, "hash-x", 60_000, "1"])).toBe(-2);
  });

  it("turn a command's refusal into a script error, and leave the VM usable", () => {
    const { vm, redis } = engine();
    redis.call("SET", [room[6], "not a hash"]);
    redis.call("DEL", [room[6]]);
    redis.call("SET", [room[0], "not a hash"]);
    expect(() => vm.run("duetRecv", [...room, "hash-a", 60_000, "1"])).toThrow(ScriptError);
    redis.call("DEL", [room[0]]);
    expect(open(vm)).toBe(IDLE);
  });

  it("one VM serves several keyspaces (every store of a process), each seeing only its own keys", () => {
    const first = engine();
    const second = engine();
    const vm = sharedLuaVm();
    expect(
      vm.runOn(first.redis, "duetOpen", [...room, keys.tallyFor(code), "hash-a", IDLE, 2 * IDLE, 600_000, "0"]),
    ).toBe(IDLE);
    expect(first.redis.call("EXISTS", [room[0]!])).toBe(1);
    expect(second.redis.call("EXISTS", [room[0]!])).toBe(0);
    // The same code opens again in the second keyspace: nothing of the first is seen there.
    expect(
      vm.runOn(second.redis, "duetOpen", [...room, keys.tallyFor(code), "hash-a", IDLE, 2 * IDLE, 600_000, "0"]),
    ).toBe(IDLE);
    expect(sharedLuaVm()).toBe(vm);
  });
});

// Each expected value is what redis-server 7.0's Lua 5.1 answers (redis-cli EVAL); the
// differential test (test/store) compares the two engines on generated expressions.
describe("the Lua VM computes as Redis's Lua 5.1 (doubles), not as fengari's 5.3 (32-bit integers)", () => {
  const vm = new LuaVm();
  it.each([
    ["tostring(2147483647 + 1)", "2147483648"],
    ["tostring(1700000000 * 1000)", "1700000000000"],
    ["tostring(10 / 2)", "5"],
    ["'x' .. 2^53", "x9.007199254741e+15"],
    ["tostring(tonumber('inf'))", "inf"],
    ["tostring(tonumber(' 0x10 '))", "16"],
    ["tostring((2147483647 % (1 / 0)) ~= (2147483647 % (1 / 0)))", "true"],
    ["tostring(math.floor(tonumber('-0')))", "-0"],
    ["tostring(math.ceil(-0.5))", "-0"],
    ["string.format('%.0f', 0.5)", "0"],
    ["string.format('%.0f', 1764000000000123)", "1764000000000123"],
    // exact ties: C rounds the digit to even where JS's toExponential and toFixed round up
    ["tostring(9007199254740993 / (-2147483648 % 2147483647))", "4194304.0039062"],
    ["tostring(936899241692445)", "9.3689924169244e+14"],
    ["'x' .. 9.5 * 10^14", "x9.5e+14"],
    // the exponent is the value's own: log10(9.99999999999994e44) rounds to 45
    ["tostring((2 - 1e15) ^ 3)", "-9.9999999999999e+44"],
    // C's pow: 1^y and (-1)^±inf are 1 (JS's Math.pow says NaN)
    ["tostring(1 ^ (1 / 0))", "1"],
    ["tostring((-1) ^ (-1 / 0))", "1"],
    ["tostring(1 ^ (0 / 0))", "1"],
    ["tostring((1 ^ math.floor(2147483647 ^ 2147483647)) + 2147483647)", "2147483648"],
  ])("%s is %s", (expression, expected) => {
    expect(vm.runSource(`return ${expression}`, [])).toBe(expected);
  });

  it("answers a number as Redis does: truncated, never -0", () => {
    expect(vm.runSource("return -0.5", [])).toBe(0);
    expect(Object.is(vm.runSource("return -0.5", []), -0)).toBe(false);
    expect(vm.runSource("return 2^53 + 2", [])).toBe(2 ** 53 + 2);
  });
});
