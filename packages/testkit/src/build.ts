// Tests that run the built relay or CLI (dist/main.js, dist/cli/main.js, the served bundle)
// build them first when a source is newer than the build, so a test never runs yesterday's
// code. `pnpm test` and `pnpm check` build everything before any test, and then this finds
// nothing to do.
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";

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

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

/** Whether a source file of the relay or the CLI is newer than the oldest build output (or one is missing). */
export function buildIsStale(root: string): boolean {
  const oldestOutput = Math.min(
    ...OUTPUTS.map((output) => join(root, "packages", output)).map((path) =>
      existsSync(path) ? statSync(path).mtimeMs : 0,
    ),
  );
  const newestSource = Math.max(...SOURCES.map((pkg) => newestMtime(join(root, "packages", pkg, "src"))));
  return newestSource > oldestOutput;
}

/** Builds protocol, testkit, client and server (in that order) when buildIsStale; compiler errors show. */
export function ensureBuilt(root: string): void {
  if (!buildIsStale(root)) return;
  execFileSync("pnpm", ["--silent", "--filter", "@duet/server...", "build"], {
    cwd: root,
    stdio: ["ignore", "inherit", "inherit"],
  });
}
