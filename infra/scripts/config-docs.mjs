#!/usr/bin/env node
// The table of environment variables in docs/configuration.md, generated from the relay's
// config schema (packages/server/src/config.ts: each variable's .describe() text and the
// default it parses to). Without arguments: exit 1 when the document differs from the
// schema (part of `pnpm lint:infra`). With --write: rewrite the table (`pnpm docs:config`).
// Reads the built server, so run after `pnpm -r build`.
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const doc = join(ROOT, "docs/configuration.md");
const built = join(ROOT, "packages/server/dist/config-reference.js");
const sources = ["config.ts", "config-reference.ts"].map((f) => join(ROOT, "packages/server/src", f));

if (!existsSync(built) || sources.some((s) => statSync(s).mtimeMs > statSync(built).mtimeMs)) {
  console.error("config-docs: packages/server/dist is missing or older than src/config.ts: run `pnpm -r build` first");
  process.exit(1);
}
const { withConfigTable } = createRequire(built)(built);
const current = readFileSync(doc, "utf8");
const expected = withConfigTable(current);
if (process.argv.includes("--write")) {
  if (expected !== current) writeFileSync(doc, expected);
  console.log(
    `config-docs: ${expected === current ? "docs/configuration.md already up to date" : "docs/configuration.md rewritten"}`,
  );
} else if (expected !== current) {
  console.error(
    "FAIL docs/configuration.md: the table of variables differs from packages/server/src/config.ts; run `pnpm docs:config`",
  );
  process.exit(1);
} else {
  console.log("ok   docs/configuration.md: the table of variables matches the config schema");
}
