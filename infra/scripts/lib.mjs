// Shared helpers of the infra checks: the contract's limits and the server's settings,
// read from the sources so no number or name is copied by hand.
import { existsSync, readFileSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

/** Numeric constants of packages/protocol/src/limits.ts (e.g. MAX_BODY_BYTES). */
export function readLimits(root) {
  const source = readFileSync(join(root, "packages/protocol/src/limits.ts"), "utf8");
  const limits = {};
  for (const [, name, expr] of source.matchAll(/export const ([A-Z0-9_]+)\s*=\s*([0-9_*+\s]+);/g)) {
    const terms = expr
      .replace(/_/g, "")
      .split("*")
      .map((t) => Number(t.trim()));
    if (terms.every(Number.isFinite)) limits[name] = terms.reduce((a, b) => a * b, 1);
  }
  for (const name of ["MAX_BODY_BYTES", "MAX_WAIT_MS", "MAX_TEXT_BYTES"]) {
    if (!Number.isFinite(limits[name])) throw new Error(`limits.ts: could not read ${name}`);
  }
  return limits;
}

/** nginx size ("14m", "512k", "1g", "1048576") in bytes. */
export function parseNginxSize(value) {
  const m = /^\s*([0-9]+)\s*([kKmMgG]?)\s*$/.exec(String(value));
  if (!m) return NaN;
  return Number(m[1]) * { "": 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[m[2].toLowerCase()];
}

/**
 * The environment variables the server reads: CONFIG_VARIABLES of packages/server/src/config.ts.
 * Uses the built module when it is at least as new as the source, else reads the keys of
 * the ConfigSchema object in the source. Returns { names, from }.
 */
export function readConfigVariables(root) {
  const src = join(root, "packages/server/src/config.ts");
  const built = join(root, "packages/server/dist/config.js");
  if (existsSync(built) && statSync(built).mtimeMs >= statSync(src).mtimeMs) {
    const names = createRequire(built)(built).CONFIG_VARIABLES;
    if (Array.isArray(names) && names.length)
      return { names, from: "packages/server/dist/config.js (CONFIG_VARIABLES)" };
  }
  const source = readFileSync(src, "utf8");
  const start = source.search(/export const ConfigSchema\s*=\s*z\s*\.object\(\{/);
  if (start < 0) throw new Error("config.ts: ConfigSchema = z.object({ ... }) not found");
  // Keys of the object literal: names at the first nesting level, up to its closing brace.
  const body = source.slice(source.indexOf("{", start) + 1);
  const names = [];
  let depth = 0;
  for (const line of body.split("\n")) {
    if (depth === 0) {
      const m = /^\s*([A-Z][A-Z0-9_]*)\s*:/.exec(line);
      if (m) names.push(m[1]);
    }
    for (const ch of line) {
      if (ch === "{" || ch === "(" || ch === "[") depth++;
      else if (ch === "}" || ch === ")" || ch === "]") depth--;
    }
    if (depth < 0) break;
  }
  if (!names.length) throw new Error("config.ts: no keys found in ConfigSchema");
  return { names, from: "packages/server/src/config.ts (ConfigSchema keys)" };
}
