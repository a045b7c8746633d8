// fengari ships no types: the part of its C-like API (Lua 5.3's, in JS) that lua-vm.ts uses.
// A Lua string crosses as its bytes (Uint8Array); a JS function takes the state and returns
// how many results it pushed.
declare module "fengari" {
  type LuaState = object;
  type LuaString = Uint8Array;
  type JsFunction = (L: LuaState) => number;
  export const lua: {
    LUA_OK: number;
    LUA_REGISTRYINDEX: number;
    LUA_TNIL: number;
    LUA_TBOOLEAN: number;
    LUA_TNUMBER: number;
    LUA_TSTRING: number;
    LUA_TTABLE: number;
    lua_gettop(L: LuaState): number;
    lua_settop(L: LuaState, index: number): void;
    lua_pop(L: LuaState, n: number): void;
    lua_type(L: LuaState, index: number): number;
    lua_toboolean(L: LuaState, index: number): boolean;
    lua_tonumber(L: LuaState, index: number): number;
    lua_tolstring(L: LuaState, index: number): LuaString;
    lua_pushnil(L: LuaState): void;
    lua_pushboolean(L: LuaState, value: boolean): void;
    lua_pushnumber(L: LuaState, value: number): void;
    lua_pushstring(L: LuaState, value: LuaString): void;
    lua_pushjsfunction(L: LuaState, fn: JsFunction): void;
    lua_createtable(L: LuaState, narr: number, nrec: number): void;
    lua_rawseti(L: LuaState, index: number, i: number): void;
    lua_rawgeti(L: LuaState, index: number, i: number): number;
    lua_rawlen(L: LuaState, index: number): number;
    lua_getfield(L: LuaState, index: number, key: LuaString): number;
    lua_setfield(L: LuaState, index: number, key: LuaString): void;
    lua_setglobal(L: LuaState, name: LuaString): void;
    lua_pcall(L: LuaState, nargs: number, nresults: number, msgh: number): number;
    lua_error(L: LuaState): never;
  };
  export const lauxlib: {
    luaL_newstate(): LuaState;
    luaL_loadbufferx(L: LuaState, buff: LuaString, size: number, name: LuaString, mode: LuaString | null): number;
    luaL_ref(L: LuaState, t: number): number;
    luaL_requiref(L: LuaState, name: LuaString, open: JsFunction, global: number): void;
  };
  export const lualib: {
    luaopen_base: JsFunction;
    luaopen_table: JsFunction;
    luaopen_string: JsFunction;
    luaopen_math: JsFunction;
  };
  export function to_luastring(value: string): LuaString;
}
