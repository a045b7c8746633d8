// The room scripts (store/redis/lua, includes expanded as for Redis) on a Lua VM in this
// process, against MiniRedis: the in-process store runs the same rules as Redis. fengari is
// Lua 5.3 in plain JS with a synchronous C-like API, so a script runs to completion inside
// one JS call: atomic, as on Redis, because nothing else runs meanwhile.
//
// What makes 5.3 behave as Redis's Lua 5.1 for these scripts: numbers are doubles (fengari's
// integers are 32-bit, and 5.1 has only doubles): lua51.ts patches how fengari reads, writes
// and takes the modulo of numbers, the prelude below makes the library's integers doubles,
// and every reply's integer is a double; `unpack` is table.unpack; a script's answer converts as Redis converts it
// (a number to an integer, truncated; a table to an array up to its first nil; false to
// nil, true to 1; {err=...} to an error), and so do its calls' arguments and replies.
import { loadLua, SCRIPTS, type ScriptName } from "../redis/scripts.js";
import { formatDouble } from "./c-numbers.js";
import { lauxlib, lua, lualib, to_luastring, withCPow } from "./lua51.js";
import { CommandError, type MiniRedis, type Reply } from "./mini-redis.js";

type LuaState = ReturnType<typeof lauxlib.luaL_newstate>;

const encoder = new TextEncoder();
// ignoreBOM: a Lua string's bytes cross whole. The default decoder drops a leading U+FEFF
// (the BOM), so a text starting with one lost it on the in-process store alone.
const decoder = new TextDecoder("utf-8", { ignoreBOM: true });
const luaString = (text: string): Uint8Array => encoder.encode(text);
const jsString = (bytes: Uint8Array): string => decoder.decode(bytes);

/** A script failed (a bug in it, or a command it called refused): a 500, as on Redis. */
export class ScriptError extends Error {}

// Run once in the fresh state, before any script: numbers made doubles where a 5.3 library
// gives integers, tostring as 5.1 writes a number (lua51.ts patches concatenation, which this
// uses), unpack as 5.1 names it.
const PRELUDE = `
local raw_tonumber, raw_tostring, raw_floor, raw_ceil = tonumber, tostring, math.floor, math.ceil
tonumber = function(...)
  local n = raw_tonumber(...)
  if n then return n * 1.0 end
  return n
end
tostring = function(v)
  if type(v) == 'number' then return v .. '' end
  return raw_tostring(v)
end
-- 5.3 gives an integer 0 for -0 (floor) and for (-1, 0) (ceil), where C gives -0.
math.floor = function(x)
  local f = raw_floor(x)
  if f == 0 and x == 0 then return x * 1.0 end
  return f + 0.0
end
math.ceil = function(x)
  local c = raw_ceil(x)
  if c == 0 then
    if x == 0 then return x * 1.0 end
    return -0.0
  end
  return c + 0.0
end
unpack = table.unpack
`;

/**
 * A Lua number as Redis passes it to a command: "%.17g" (Redis 7.0), so integers in plain
 * digits below 1e17 only (1e17 is "1e+17", which an integer argument refuses).
 */
const numberArg = (n: number): string => formatDouble(n);

/**
 * A Lua number as Redis replies with it: C's (long long) cast, truncated toward zero (never
 * -0); NaN and what is past 2^63 come out as x86's "integer indefinite", -2^63.
 */
const integerReply = (n: number): number => {
  const whole = Math.trunc(n);
  return Math.abs(whole) < 2 ** 63 ? whole + 0 : -(2 ** 63);
};

export class LuaVm {
  private readonly L: LuaState;
  private readonly scripts = new Map<ScriptName, number>();

  /** `redis`: the keyspace scripts run against, until runOn names another. */
  constructor(private redis?: MiniRedis) {
    const L = lauxlib.luaL_newstate();
    this.L = L;
    // The libraries Redis's scripts may use; no io, os or package.
    const libraries = [
      ["_G", lualib.luaopen_base],
      ["table", lualib.luaopen_table],
      ["string", lualib.luaopen_string],
      ["math", lualib.luaopen_math],
    ] as const;
    for (const [name, open] of libraries) {
      lauxlib.luaL_requiref(L, to_luastring(name), open, 1);
      lua.lua_pop(L, 1);
    }
    lua.lua_createtable(L, 0, 1);
    lua.lua_pushjsfunction(L, (state) => this.redisCall(state));
    lua.lua_setfield(L, -2, to_luastring("call"));
    lua.lua_setglobal(L, to_luastring("redis"));
    this.load("prelude", PRELUDE);
    this.protectedCall(0, 0, "prelude");
  }

  /** The script's compiled chunk, compiled on its first run: compiling all of them costs a start 100 ms and more. */
  private compiled(name: ScriptName): number {
    let ref = this.scripts.get(name);
    if (ref === undefined) {
      this.load(SCRIPTS[name].file, loadLua(SCRIPTS[name].file));
      ref = lauxlib.luaL_ref(this.L, lua.LUA_REGISTRYINDEX);
      this.scripts.set(name, ref);
    }
    return ref;
  }

  private load(name: string, source: string): void {
    const bytes = luaString(source);
    if (
      withCPow(() => lauxlib.luaL_loadbufferx(this.L, bytes, bytes.length, to_luastring(`@${name}`), null)) !==
      lua.LUA_OK
    )
      throw new ScriptError(`cannot load ${name}: ${this.popError()}`);
  }

  private popError(): string {
    const L = this.L;
    const message = lua.lua_type(L, -1) === lua.LUA_TSTRING ? jsString(lua.lua_tolstring(L, -1)) : "(no message)";
    lua.lua_pop(L, 1);
    return message;
  }

  private protectedCall(nargs: number, nresults: number, name: string): void {
    if (withCPow(() => lua.lua_pcall(this.L, nargs, nresults, 0)) !== lua.LUA_OK)
      throw new ScriptError(`script ${name}: ${this.popError()}`);
  }

  /**
   * Runs a script with its keys then its arguments (as ioredis's defined commands take
   * them) and answers as Redis would.
   */
  run(name: ScriptName, keysThenArgs: readonly (string | number)[]): Reply {
    if (!this.redis) throw new ScriptError("no keyspace to run on: use runOn");
    const L = this.L;
    const { numberOfKeys } = SCRIPTS[name];
    const strings = keysThenArgs.map((value) => (typeof value === "number" ? numberArg(value) : value));
    this.setTable("KEYS", strings.slice(0, numberOfKeys));
    this.setTable("ARGV", strings.slice(numberOfKeys));
    lua.lua_rawgeti(L, lua.LUA_REGISTRYINDEX, this.compiled(name));
    return this.callChunk(SCRIPTS[name].file);
  }

  /**
   * Runs Lua given as text, compiled for this call, with no keys and these arguments: a
   * test's probe of the engine (the differential test runs the same text on Redis).
   */
  runSource(source: string, args: readonly string[]): Reply {
    this.setTable("KEYS", []);
    this.setTable("ARGV", [...args]);
    this.load("probe", source);
    return this.callChunk("probe");
  }

  private callChunk(name: string): Reply {
    this.protectedCall(0, 1, name);
    try {
      return this.reply(-1);
    } finally {
      lua.lua_settop(this.L, 0);
    }
  }

  /**
   * Runs a script against `redis`: one VM serves every store of the process (a script runs to
   * completion inside this call, so the keyspace it sees cannot change under it), and each
   * script is compiled once per process, not once per store.
   */
  runOn(redis: MiniRedis, name: ScriptName, keysThenArgs: readonly (string | number)[]): Reply {
    this.redis = redis;
    return this.run(name, keysThenArgs);
  }

  private setTable(global: string, values: string[]): void {
    const L = this.L;
    lua.lua_createtable(L, values.length, 0);
    values.forEach((value, i) => {
      lua.lua_pushstring(L, luaString(value));
      lua.lua_rawseti(L, -2, i + 1);
    });
    lua.lua_setglobal(L, to_luastring(global));
  }

  /** The Lua value at `index` as Redis converts a script's answer. */
  private reply(index: number): Reply {
    const L = this.L;
    const type = lua.lua_type(L, index);
    if (type === lua.LUA_TNUMBER) return integerReply(lua.lua_tonumber(L, index));
    if (type === lua.LUA_TSTRING) return jsString(lua.lua_tolstring(L, index));
    if (type === lua.LUA_TBOOLEAN) return lua.lua_toboolean(L, index) ? 1 : null;
    if (type !== lua.LUA_TTABLE) return null;
    const at = index < 0 ? lua.lua_gettop(L) + index + 1 : index;
    if (lua.lua_getfield(L, at, to_luastring("err")) === lua.LUA_TSTRING) {
      const message = jsString(lua.lua_tolstring(L, -1));
      lua.lua_pop(L, 1);
      throw new ScriptError(message);
    }
    lua.lua_pop(L, 1);
    if (lua.lua_getfield(L, at, to_luastring("ok")) === lua.LUA_TSTRING) {
      const status = jsString(lua.lua_tolstring(L, -1));
      lua.lua_pop(L, 1);
      return status;
    }
    lua.lua_pop(L, 1);
    const items: Reply[] = [];
    for (let i = 1; lua.lua_rawgeti(L, at, i) !== lua.LUA_TNIL; i++) {
      items.push(this.reply(-1));
      lua.lua_pop(L, 1);
    }
    lua.lua_pop(L, 1);
    return items;
  }

  /** redis.call: runs the command on MiniRedis and pushes its reply; a refusal raises a Lua error. */
  private redisCall(L: LuaState): number {
    const args: string[] = [];
    for (let i = 1, top = lua.lua_gettop(L); i <= top; i++) {
      const type = lua.lua_type(L, i);
      if (type === lua.LUA_TNUMBER) args.push(numberArg(lua.lua_tonumber(L, i)));
      else if (type === lua.LUA_TSTRING) args.push(jsString(lua.lua_tolstring(L, i)));
      else return this.raise("ERR Lua redis lib command arguments must be strings or integers");
    }
    if (args.length === 0) return this.raise("ERR Please specify at least one argument for this redis lib call");
    let reply: Reply;
    try {
      reply = this.redis!.call(args[0]!, args.slice(1));
    } catch (error) {
      if (error instanceof CommandError) return this.raise(error.message);
      throw error;
    }
    this.push(reply);
    return 1;
  }

  private raise(message: string): never {
    lua.lua_pushstring(this.L, luaString(message));
    return lua.lua_error(this.L);
  }

  /** A command's reply as Redis hands it to a script: nil as false, integers as numbers. */
  private push(reply: Reply): void {
    const L = this.L;
    if (reply === null) lua.lua_pushboolean(L, false);
    else if (typeof reply === "number") lua.lua_pushnumber(L, reply);
    else if (typeof reply === "string") lua.lua_pushstring(L, luaString(reply));
    else {
      lua.lua_createtable(L, reply.length, 0);
      reply.forEach((item, i) => {
        this.push(item);
        lua.lua_rawseti(L, -2, i + 1);
      });
    }
  }
}

let shared: LuaVm | undefined;
/** The process's VM: made (its libraries opened, about 90 ms and 8 MiB) by the first store that runs a script. */
export function sharedLuaVm(): LuaVm {
  shared ??= new LuaVm();
  return shared;
}
