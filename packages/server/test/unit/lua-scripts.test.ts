// The Lua scripts as files: each documents its KEYS and ARGV at the top, and refuses only
// with the named refusals of includes/refusals.lua, which mean what the store reads them as
// (one meaning each: a status that meant four things is how a refusal gets misread).
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Refusal } from "../../src/store/redis/redis-store";
import { loadLua } from "../../src/store/redis/scripts";

const LUA = join(__dirname, "../../src/store/redis/lua");
const scripts = readdirSync(LUA).filter((file) => file.endsWith(".lua"));
const camel = (name: string) => name.toLowerCase().replace(/_(\w)/g, (_m, c: string) => c.toUpperCase());

it("the refusals named in refusals.lua are the store's Refusal table, each a distinct value", () => {
  const lua = readFileSync(join(LUA, "includes/refusals.lua"), "utf8");
  const named = [...lua.matchAll(/^local ([A-Z_]+) = (-\d+)/gm)].map(
    ([, name, value]) => [camel(name!), Number(value)] as const,
  );
  expect(Object.fromEntries(named)).toEqual(Refusal);
  expect(new Set(named.map(([, value]) => value)).size).toBe(named.length);
});

describe.each(scripts)("%s", (file) => {
  const source = readFileSync(join(LUA, file), "utf8");

  it("documents its KEYS, ARGV and what it returns, at the top", () => {
    const header = source.slice(0, source.search(/^[^-]/m));
    expect(header).toMatch(/KEYS\[1(\]|\.\.)/);
    expect(header).toMatch(/ARGV\[1\]/);
    expect(header).toMatch(/Returns:/);
  });

  it("returns no bare negative status: refusals go by name", () => {
    const expanded = loadLua(file);
    expect(expanded.match(/return[ ({]*-\d/g)).toBeNull();
    expect(expanded.match(/return nil, -\d/g)).toBeNull();
  });
});

it("docs/redis.md's script table has one row per script, and names no other", () => {
  const doc = readFileSync(join(__dirname, "../../../../docs/redis.md"), "utf8");
  const table = doc.slice(doc.indexOf("| Script | Does, atomically |"));
  const rows = [...table.matchAll(/^\| `([a-z0-9-]+)` \|/gm)].map(([, name]) => `${name}.lua`);
  expect(rows.sort()).toEqual([...scripts].sort());
});
