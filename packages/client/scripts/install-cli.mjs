// `pnpm install-cli`: installs the one-file CLI (dist/bundle, built by `pnpm build`) with
// npm as a global package, so `duet` is on PATH in every shell, interactive or not, and
// keeps working if the checkout moves. Uninstall with `npm uninstall --global @duet/cli`.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const bundleDir = join(dirname(fileURLToPath(import.meta.url)), "..", "dist", "bundle");
if (!existsSync(join(bundleDir, "duet.cjs"))) {
  console.error(`${bundleDir}/duet.cjs is missing: run 'pnpm --filter @duet/client... build' first.`);
  process.exit(1);
}

// pnpm hands its own settings to scripts as npm_config_* variables (its globalconfig among
// them), which npm would read as its own; keep only the prefix a user may set on purpose.
const env = Object.fromEntries(
  Object.entries(process.env).filter(([key]) => !/^npm_config_/i.test(key) || /^npm_config_prefix$/i.test(key)),
);
const npm = (args) => spawnSync("npm", args, { env, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });

// --install-links copies the folder instead of linking to the checkout.
const install = npm([
  "install",
  "--global",
  "--install-links",
  "--no-fund",
  "--no-audit",
  "--no-update-notifier",
  bundleDir,
]);
if (install.status !== 0) {
  process.stderr.write(install.stdout ?? "");
  process.exit(install.status ?? 1);
}
const prefix = npm(["prefix", "--global"]).stdout.trim();
const binDir = process.platform === "win32" ? prefix : join(prefix, "bin");
console.log(`Installed duet as ${join(binDir, "duet")} (needs only Node 20). Try: duet --help`);
const onPath = (process.env.PATH ?? "").split(process.platform === "win32" ? ";" : ":").includes(binDir);
if (!onPath) console.log(`${binDir} is not on your PATH: add it, e.g. export PATH="${binDir}:$PATH"`);
