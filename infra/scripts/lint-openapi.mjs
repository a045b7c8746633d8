#!/usr/bin/env node
// Lints the generated OpenAPI document (packages/protocol/src/openapi.ts, from the endpoint
// table) with Redocly CLI, a linter nobody on this project wrote. Its "recommended" rules run
// as "recommended-strict" (every warning is an error), so the document must have zero errors
// and zero warnings. Part of `pnpm lint:infra`; reads the built protocol package, so run after
// `pnpm -r build`.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const built = join(ROOT, "packages/protocol/dist/index.js");
if (!existsSync(built)) {
  console.error("lint-openapi: packages/protocol/dist is missing: run `pnpm -r build` first");
  process.exit(1);
}
const { buildOpenApiDocument } = createRequire(built)(built);
const dir = mkdtempSync(join(tmpdir(), "duet-openapi-"));
try {
  // Both forms the relay serves: with its public URL and without one.
  const files = [
    ["openapi.json", buildOpenApiDocument("https://relay.example")],
    ["openapi-no-url.json", buildOpenApiDocument()],
  ].map(([name, doc]) => {
    const file = join(dir, name);
    writeFileSync(file, JSON.stringify(doc, null, 2));
    return file;
  });
  const redocly = join(ROOT, "node_modules/.bin/redocly");
  const run = spawnSync(redocly, ["lint", "--extends", "recommended-strict", ...files], {
    encoding: "utf8",
    env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" },
  });
  const output = `${run.stdout}${run.stderr}`;
  if (run.status !== 0) {
    console.error(output);
    console.error("FAIL lint-openapi: the generated OpenAPI document has Redocly findings (above)");
    process.exit(1);
  }
  console.log("lint-openapi: the OpenAPI document passes Redocly's recommended rules with 0 errors and 0 warnings");
} finally {
  rmSync(dir, { recursive: true, force: true });
}
