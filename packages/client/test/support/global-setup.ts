// Jest global setup: the end-to-end tests run the built server and the built CLI, so build
// protocol, server and client when a dist is missing or older than its sources.
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join, resolve } from "node:path";

const ROOT = resolve(__dirname, "../../../..");

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

function isStale(pkg: string, output: string): boolean {
  const built = join(ROOT, "packages", pkg, output);
  if (!existsSync(built)) return true;
  return newestMtime(join(ROOT, "packages", pkg, "src")) > statSync(built).mtimeMs;
}

export default function globalSetup(): void {
  const stale = [
    ["protocol", "dist/index.js"],
    ["server", "dist/main.js"],
    ["client", "dist/cli/main.js"],
    ["client", "dist/bundle/duet.cjs"],
    // The server's build copies the client's bundle and skill in, to serve them.
    ["server", "dist/public/duet.cjs"],
  ].filter(([pkg, output]) => isStale(pkg!, output!));
  if (stale.length === 0) return;
  // Building protocol first matters: server and client compile against its sources, but run its dist.
  execFileSync("pnpm", ["--filter", "@duet/server...", "--filter", "@duet/client...", "build"], {
    cwd: ROOT,
    stdio: "inherit",
  });
}
