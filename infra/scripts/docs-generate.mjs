#!/usr/bin/env node
// Every generated list of the repository (packages/server/src/generated-docs.ts says which and
// from what): docs/protocol.md's endpoint tables and lists of operations, from the endpoint
// table; docs/redis.md's script table and refusals; docs/configuration.md's variables.
// Without arguments: exit 1 when a file differs from what its source renders (part of
// `pnpm lint:infra`). With --write: rewrite them (`pnpm docs:generate`). Reads the built
// packages, so run after `pnpm -r build`.
import { existsSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const built = join(ROOT, "packages/server/dist/generated-docs.js");
const builtProtocol = join(ROOT, "packages/protocol/dist/endpoint-docs.js");

// The sources that render something: the protocol's, and the server's that generated-docs.ts reads.
const sources = [
  ...readdirSync(join(ROOT, "packages/protocol/src")).map((f) => join(ROOT, "packages/protocol/src", f)),
  ...[
    "generated-docs.ts",
    "config.ts",
    "config-reference.ts",
    "store/redis/scripts.ts",
    "store/redis/lua/includes/refusals.lua",
  ].map((f) => join(ROOT, "packages/server/src", f)),
];
const oldest = Math.min(
  ...[built, builtProtocol].map((f) => (existsSync(f) ? statSync(f).mtimeMs : Number.NEGATIVE_INFINITY)),
);
const stale = sources.filter((s) => statSync(s).mtimeMs > oldest);
if (stale.length > 0) {
  console.error(
    `docs-generate: packages/*/dist is missing or older than ${stale.map((s) => s.slice(ROOT.length + 1)).join(", ")}: run \`pnpm -r build\` first`,
  );
  process.exit(1);
}

const { generatedFiles } = createRequire(built)(built);
const differing = generatedFiles(ROOT).filter(({ current, expected }) => current !== expected);
if (process.argv.includes("--write")) {
  for (const { file, expected } of differing) writeFileSync(join(ROOT, file), expected);
  console.log(
    differing.length === 0
      ? "docs-generate: every generated list already up to date"
      : `docs-generate: rewrote ${differing.map(({ file }) => file).join(", ")}`,
  );
} else if (differing.length > 0) {
  for (const { file } of differing)
    console.error(
      `FAIL ${file}: differs from what its source renders (the endpoint table, SCRIPTS, refusals.lua, the config schema)`,
    );
  console.error("run `pnpm docs:generate`, then commit the files");
  process.exit(1);
} else {
  console.log("ok   generated lists: the documents' tables and lists match their sources");
}
