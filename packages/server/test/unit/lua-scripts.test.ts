// The Lua scripts as files: each documents its KEYS and ARGV at the top, and refuses only
// with the named refusals of includes/refusals.lua, which mean what the store reads them as
// (one meaning each: a status that meant four things is how a refusal gets misread).
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Refusal } from "../../src/store/redis/redis-store";
import { loadLua, SCRIPTS } from "../../src/store/redis/scripts";

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

  it("is named for the keys it uses: <operation>-<number of keys>.lua", () => {
    const used = [...loadLua(file).matchAll(/KEYS\[(\d+)\]/g)].map(([, n]) => Number(n));
    expect(Math.max(...used)).toBe(Number(/-(\d+)\.lua$/.exec(file)?.[1]));
  });

  // The in-process store runs the scripts on fengari, patched to compute as Lua 5.1
  // (store/memory/lua51.ts); what it leaves as 5.3 is kept out of the scripts here, and the
  // differential test (test/store) compares the rest with Redis at the numeric edges.
  it("uses only what fengari and Redis's Lua 5.1 compute alike: string.format with '%.0f' alone, no 5.3 operators, no ^", () => {
    const code = loadLua(file).replace(/--.*$/gm, "");
    const formats = [...code.matchAll(/string\.format\(\s*(['"])(.*?)\1/g)].map(([, , format]) => format);
    expect(formats.filter((format) => format !== "%.0f")).toEqual([]);
    expect(code).not.toMatch(/string\.format\(\s*[^'"\s]/); // a format that is not a literal
    expect(code).not.toMatch(/\/\/|<<|>>|&|\||~(?!=)|math\.tointeger|utf8\./); // 5.3: //, bitwise, integers, utf8
    // Exact on both engines: + - * / %, and these. `^` and math.sqrt/log/exp/sin... are the C
    // library's on Redis and V8's here, which can differ in the last bit (docs/endpoints.md).
    const strings = /(['"])(?:\\.|(?!\1).)*\1/g;
    expect(code.replace(strings, "''")).not.toMatch(/\^/);
    const math = [...code.matchAll(/math\.(\w+)/g)].map(([, name]) => name);
    expect(math.filter((name) => !["floor", "ceil", "abs", "max", "min", "huge"].includes(name!))).toEqual([]);
  });

  it("returns no bare negative status: refusals go by name", () => {
    const expanded = loadLua(file);
    expect(expanded.match(/return[ ({]*-\d/g)).toBeNull();
    expect(expanded.match(/return nil, -\d/g)).toBeNull();
  });
});

it("SCRIPTS registers every file of lua/ once, with the key count its name carries (docs/redis.md's script table is generated from it)", () => {
  expect(
    Object.values(SCRIPTS)
      .map(({ file }) => file)
      .sort(),
  ).toEqual([...scripts].sort());
  // The key count is the file name's: no script (its includes expanded) reads a key past it.
  for (const { file, numberOfKeys } of Object.values(SCRIPTS)) {
    const read = [...loadLua(file).matchAll(/KEYS\[(\d+)\]/g)].map((match) => Number(match[1]));
    expect({ file, past: read.filter((key) => key > numberOfKeys) }).toEqual({ file, past: [] });
  }
});
