#!/usr/bin/env node
// duet: what `pnpm test` needs on the machine, installed only when missing.
//
//   node infra/scripts/test-prerequisites.mjs        (run by `pnpm test` and `pnpm check` after the build)
//
// Checks every entry of PREREQUISITES. When all are present it prints one line. Each one
// missing is installed with apt-get (Debian/Ubuntu, as root), saying so in one line; when
// that is not possible (not root, no apt-get, DUET_NO_INSTALL=1) it says what to install
// and exits 1 before any test runs. To add a prerequisite, add one entry.
import { spawnSync } from "node:child_process";
import { existsSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

// which() from the built testkit (`pnpm test` and `pnpm check` build before they run this).
const TESTKIT = join(resolve(dirname(fileURLToPath(import.meta.url)), "../.."), "packages/testkit/dist/index.js");
const { which } = await import(TESTKIT).catch(() => {
  process.stderr.write(`test prerequisites: ${TESTKIT} is missing: run \`pnpm -r build\` first\n`);
  process.exit(2);
});

/**
 * name:    what the line says;
 * why:     which tests need it;
 * apt:     the Debian packages that provide it;
 * present: () => true when it is usable (default: `bin` is on PATH or in an sbin directory).
 */
const PREREQUISITES = [
  {
    name: "redis-server",
    bin: "redis-server",
    apt: ["redis-server"],
    why: "every Redis-backed test spawns its own redis-server",
  },
  {
    name: "redis-cli",
    bin: "redis-cli",
    apt: ["redis-tools"],
    why: "the Redis Cluster tests join their nodes with redis-cli",
  },
  { name: "nginx", bin: "nginx", apt: ["nginx"], why: "the topology test puts nginx in front of three relays" },
  { name: "ss", bin: "ss", apt: ["iproute2"], why: "the listen-backlog test reads the relay's listening socket" },
  {
    name: "prometheus and promtool",
    bin: "promtool",
    apt: ["prometheus"],
    why: "the metrics tests check /metrics with promtool and scrape a topology with Prometheus",
    present: () => which("promtool") !== undefined && which("prometheus") !== undefined,
  },
  // DUET_BROWSER_TESTS=off / DUET_COMPOSE_TEST=off leave those tests out, and so these.
  ...(process.env.DUET_BROWSER_TESTS === "off"
    ? []
    : [
        {
          name: "chromium",
          bin: "chromium",
          apt: ["chromium"],
          why: "the browser test renders the landing and join pages headless",
          present: () => Boolean(process.env.CHROMIUM_PATH) || which("chromium") !== undefined,
        },
      ]),
  // The engine itself is started, and the base images made, by the compose test's own set-up
  // (packages/deploy-tests/docker/docker-env.sh), which also says so in one line each.
  ...(process.env.DUET_COMPOSE_TEST === "off"
    ? []
    : [
        {
          name: "a Docker engine",
          bin: "dockerd",
          apt: ["docker.io", "iptables"],
          why: "the compose test builds the image and runs docker-compose.yml",
        },
      ]),
];

const isPresent = (p) => (p.present ? p.present() : which(p.bin) !== undefined);
const say = (line) => process.stdout.write(`test prerequisites: ${line}\n`);

function aptGet(args) {
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  // Another install on the machine (a second test run, unattended upgrades) holds dpkg's
  // lock for a while: wait for it rather than fail.
  const run = spawnSync("apt-get", ["-o", "DPkg::Lock::Timeout=600", ...args], {
    env,
    encoding: "utf8",
    stdio: ["ignore", "ignore", "pipe"],
    timeout: 600_000,
  });
  return { ok: run.status === 0, stderr: run.stderr ?? String(run.error ?? "") };
}

/** apt-get install, with one `apt-get update` when the package lists are stale or missing. */
function install(packages) {
  // A package's install script must not start a system-wide service (nginx on port 80):
  // the tests start their own. policy-rc.d answering 101 is Debian's way to say so.
  const policy = "/usr/sbin/policy-rc.d";
  const ownPolicy = !existsSync(policy);
  if (ownPolicy)
    writeFileSync(policy, "#!/bin/sh\n# written by duet's test-prerequisites.mjs while it installs\nexit 101\n", {
      mode: 0o755,
    });
  try {
    const args = ["install", "-y", "-q", "--no-install-recommends", ...packages];
    let result = aptGet(args);
    if (!result.ok) {
      aptGet(["update", "-q"]);
      result = aptGet(args);
    }
    return result;
  } finally {
    if (ownPolicy) rmSync(policy, { force: true });
  }
}

function main() {
  const missing = PREREQUISITES.filter((p) => !isPresent(p));
  if (missing.length === 0) {
    say(`${PREREQUISITES.map((p) => p.name).join(", ")} present`);
    return 0;
  }
  const canInstall = process.getuid?.() === 0 && which("apt-get") !== undefined && process.env.DUET_NO_INSTALL !== "1";
  if (!canInstall) {
    for (const p of missing) say(`${p.name} is missing (${p.why})`);
    const packages = missing.flatMap((p) => p.apt).join(" ");
    say(`install it first, e.g. \`sudo apt-get install -y ${packages}\`, then run the tests again`);
    return 1;
  }
  for (const p of missing) {
    say(`${p.name} is missing (${p.why}); installing ${p.apt.join(" ")} with apt-get`);
    const result = install(p.apt);
    if (!result.ok || !isPresent(p)) {
      process.stderr.write(result.stderr);
      say(`installing ${p.apt.join(" ")} failed; install ${p.name} yourself and run the tests again`);
      return 1;
    }
  }
  return 0;
}

process.exitCode = main();
