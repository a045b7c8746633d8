#!/usr/bin/env node
// Builds the relay and the CLI (protocol, testkit, client, server) when a source is newer
// than the build, or a build output is missing; otherwise does nothing. `pnpm start` runs it
// before the relay, and the tests that run the built relay or CLI before they start, so
// neither runs yesterday's code, and an up-to-date build is never rewritten while another
// process (a test lane, a running relay) reads it. `pnpm build` always builds.
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
/** The packages whose sources the built relay and CLI are made of. */
const SOURCES = ["protocol", "testkit", "client", "server"];
/** What their build writes, the bundle the server copies in to serve included. */
const OUTPUTS = [
  "protocol/dist/index.js",
  "testkit/dist/index.js",
  "client/dist/cli/main.js",
  "client/dist/bundle/duet.cjs",
  "server/dist/main.js",
  "server/dist/public/duet.cjs",
];

function newestMtime(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

/** Whether a source file is newer than the oldest build output (or one is missing). */
export function buildIsStale(root = ROOT) {
  const oldestOutput = Math.min(
    ...OUTPUTS.map((output) => join(root, "packages", output)).map((path) =>
      existsSync(path) ? statSync(path).mtimeMs : 0,
    ),
  );
  const newestSource = Math.max(...SOURCES.map((pkg) => newestMtime(join(root, "packages", pkg, "src"))));
  return newestSource > oldestOutput;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url) && buildIsStale()) {
  execFileSync("pnpm", ["--silent", "--filter", "@duet/server...", "build"], {
    cwd: ROOT,
    stdio: ["ignore", "inherit", "inherit"],
  });
}
