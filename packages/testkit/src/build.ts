// Tests that run the built relay or CLI (dist/main.js, dist/cli/main.js, the served bundle)
// build them first when a source is newer than the build (infra/scripts/build-if-stale.mjs,
// what `pnpm start` runs too), so a test never runs yesterday's code. `pnpm test` and
// `pnpm check` build everything before any test, and then this finds nothing to do.
import { execFileSync } from "node:child_process";
import { join } from "node:path";

/** Builds protocol, testkit, client and server when a source is newer than the build; compiler errors show. */
export function ensureBuilt(root: string): void {
  execFileSync(process.execPath, [join(root, "infra/scripts/build-if-stale.mjs")], {
    cwd: root,
    stdio: ["ignore", "inherit", "inherit"],
  });
}
