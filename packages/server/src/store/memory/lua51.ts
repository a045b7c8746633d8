// fengari (Lua 5.3 in JS) made to compute as Redis's Lua 5.1, whose numbers are all doubles:
// reading a number is C's strtod, writing one is "%.14g", a % b is a - floor(a/b)*b, `^` is
// C's pow, and string.format('%.<n>f') rounds as C does. lua-vm.ts takes fengari from here, so
// the patch is in place before any fengari module that copies what it patches is loaded. What
// stays 5.3, and how the differential test holds the two engines equal: docs/endpoints.md,
// "Adding a Lua script".
import type * as Fengari from "fengari";
import { formatFixed, formatG, strtod } from "./c-numbers.js";

/** A Lua value cell of fengari's (lobject.js TValue): the part used here. */
interface TValue {
  value: unknown;
  setfltvalue(value: number): void;
  setsvalue(value: unknown): void;
}

// fengari's modules are CommonJS objects, patched in place (a namespace import is a copy).
// llimits first: lvm.js and lobject.js copy luai_nummod when they load.
const llimits = require("fengari/src/llimits.js") as Record<string, unknown>;
llimits.luai_nummod = (_L: unknown, a: number, b: number): number => a - Math.floor(a / b) * b;

// string.format's %.<n>f as C writes it (sprintf-js, which lstrlib.js copies when it loads,
// writes JS's toFixed: 0.5 as "1" where C writes "0").
const sprintfJs = require(require.resolve("sprintf-js", { paths: [require.resolve("fengari")] })) as {
  sprintf(format: string, ...args: unknown[]): string;
};
const jsSprintf = sprintfJs.sprintf;
sprintfJs.sprintf = (format: string, ...args: unknown[]): string => {
  const fixed = /^%\.(\d+)f$/.exec(format);
  if (fixed && typeof args[0] === "number") return formatFixed(args[0], Number(fixed[1]));
  return jsSprintf(format, ...args);
};

const fengari = require("fengari") as typeof Fengari;
// lvm.js, lapi.js and llex.js call these two through the module object: they see the patch.
const lobject = require("fengari/src/lobject.js") as Record<string, unknown>;
const { luaS_bless } = require("fengari/src/lstring.js") as {
  luaS_bless(L: unknown, bytes: Uint8Array): unknown;
};

const decoder = new TextDecoder("utf-8", { ignoreBOM: true });

/** 5.1's luaO_str2d: strtod on the text up to its first NUL, then only spaces; always a double. */
lobject.luaO_str2num = (bytes: Uint8Array, out: TValue): number => {
  const nul = bytes.indexOf(0);
  const text = decoder.decode(nul === -1 ? bytes : bytes.subarray(0, nul));
  const { value, consumed } = strtod(text);
  if (consumed === 0 || !/^[ \t\n\v\f\r]*$/.test(text.slice(consumed))) return 0;
  out.setfltvalue(value);
  // fengari's callers take a conversion as whole when this is the length plus one.
  return bytes.length + 1;
};

/** 5.1's luaO_tostring for a number: "%.14g", integers and doubles alike. */
lobject.luaO_tostring = (L: unknown, obj: TValue): void => {
  obj.setsvalue(luaS_bless(L, fengari.to_luastring(formatG(obj.value as number, 14))));
};

export const { lauxlib, lua, lualib, to_luastring } = fengari;

const jsPow = Math.pow;
/** C's pow: JS's Math.pow except that 1^y (any y, NaN too) and (-1)^±inf are 1, where JS says NaN. */
export function cPow(x: number, y: number): number {
  if (x === 1 || (x === -1 && (y === Number.POSITIVE_INFINITY || y === Number.NEGATIVE_INFINITY))) return 1;
  return jsPow(x, y);
}

/**
 * Runs `step` (compiling or running Lua) with `^` computed as C computes it: fengari's VM and
 * its constant folding call the global Math.pow, so it is swapped for cPow while Lua runs
 * (synchronously: no other code runs meanwhile) and put back after.
 */
export function withCPow<T>(step: () => T): T {
  const previous = Math.pow;
  Math.pow = cPow;
  try {
    return step();
  } finally {
    Math.pow = previous;
  }
}
