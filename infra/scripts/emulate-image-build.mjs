#!/usr/bin/env node
// Runs the Dockerfile's build steps without a Docker engine, then starts the result the
// way the runtime stage does and runs its HEALTHCHECK command.
//   node infra/scripts/emulate-image-build.mjs [--keep]
// What it checks: the build context (.dockerignore) has everything the build needs; the
// install/build/deploy commands of the build stage (read from the Dockerfile itself, so
// they cannot drift) work from the lockfile; the deployed tree holds only production
// dependencies and starts with `node dist/main.js` (HOST=0.0.0.0, in-memory store); the
// HEALTHCHECK command reports healthy. What it cannot check: the base images, the
// BuildKit cache mounts, file ownership and the image's size - build the image for that.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const keep = process.argv.includes("--keep");
const work = mkdtempSync(join(tmpdir(), "duet-image-"));
const context = join(work, "src");
const out = join(work, "out");
const step = (msg) => console.log(`[image] ${msg}`);

function sh(command, cwd) {
  step(`$ ${command}`);
  const r = spawnSync("bash", ["-o", "pipefail", "-c", command], { cwd, stdio: "inherit", env: { ...process.env, CI: "true" }, timeout: 300_000 });
  if (r.status !== 0) throw new Error(`failed (${r.status ?? r.signal}): ${command}`);
}

try {
  // 1. The build context: tracked files minus .dockerignore (directory and glob rules).
  const ignore = readFileSync(join(ROOT, ".dockerignore"), "utf8").split("\n").map((l) => l.trim()).filter((l) => l && !l.startsWith("#"));
  const toRegex = (pattern) =>
    new RegExp(`^${pattern.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*\*\//g, "(.*/)?").replace(/\*/g, "[^/]*")}(/.*)?$`);
  const rules = ignore.map(toRegex);
  const files = execFileSync("git", ["ls-files", "-co", "--exclude-standard"], { cwd: ROOT, encoding: "utf8" }).split("\n").filter(Boolean);
  const kept = files.filter((f) => existsSync(join(ROOT, f)) && !rules.some((r) => r.test(f)));
  for (const f of kept) cpSync(join(ROOT, f), join(context, f));
  step(`context: ${kept.length} of ${files.length} files (.dockerignore applied)`);

  // 2. The build stage's commands, from the Dockerfile.
  const dockerfile = readFileSync(join(ROOT, "Dockerfile"), "utf8").replace(/\\\n/g, " ");
  const buildStage = dockerfile.split(/^FROM /m).find((s) => /AS build/.test(s.split("\n")[0]));
  const runs = [...buildStage.matchAll(/^RUN\s+(.*)$/gm)].map((m) => m[1].replace(/--mount=\S+/g, "").trim());
  const commands = runs
    .at(-1)
    .split("&&")
    .map((c) => c.trim())
    .filter((c) => !/^pnpm config set/.test(c)) // the image's store location; not on this machine
    .map((c) => c.replaceAll("/out", out));
  if (!commands.some((c) => c.startsWith("pnpm install")) || !commands.some((c) => c.includes(" deploy "))) throw new Error("Dockerfile: build stage RUN not recognised");
  const pnpmPin = /pnpm@([0-9.]+)/.exec(buildStage)?.[1];
  const packageManager = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).packageManager;
  if (packageManager !== `pnpm@${pnpmPin}`) throw new Error(`Dockerfile installs pnpm@${pnpmPin} but package.json pins ${packageManager}`);
  for (const c of commands) sh(c.replace(/--offline/g, "--prefer-offline"), context);

  // 3. What the runtime stage copies.
  const deployed = readdirSync(out).sort();
  step(`deployed: ${deployed.join(", ")}`);
  for (const need of ["package.json", "node_modules", "dist"]) if (!deployed.includes(need)) throw new Error(`deploy output lacks ${need}`);
  const devOnly = ["typescript", "jest", "@swc/core", "supertest", "testcontainers", "dclint"].filter((d) => existsSync(join(out, "node_modules", d)));
  if (devOnly.length) throw new Error(`development dependencies in the deploy output: ${devOnly.join(", ")}`);
  const cmd = JSON.parse(/^CMD\s+(\[.*\])\s*$/m.exec(dockerfile)[1]);
  const health = JSON.parse(/HEALTHCHECK[^\n]*?CMD\s+(\[.*\])\s*$/m.exec(dockerfile)[1]);

  // 4. Start it like the image does and run the HEALTHCHECK.
  const port = await new Promise((r) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const p = s.address().port;
      s.close(() => r(p));
    });
  });
  const env = { PATH: process.env.PATH, NODE_ENV: "production", HOST: "0.0.0.0", PORT: String(port), SHUTDOWN_DRAIN_SECONDS: "1" };
  step(`$ ${cmd.join(" ")}  (in the deploy output, PORT=${port}, no Redis: in-memory store)`);
  const server = spawn(cmd[0] === "node" ? process.execPath : cmd[0], cmd.slice(1), { cwd: out, env, stdio: ["ignore", "pipe", "inherit"] });
  let output = "";
  server.stdout.on("data", (d) => (output += d));
  const deadline = Date.now() + 20_000;
  while (!output.includes('"listening"')) {
    if (server.exitCode !== null) throw new Error(`server exited (${server.exitCode}):\n${output}`);
    if (Date.now() > deadline) throw new Error(`server did not log "listening" in 20 s:\n${output}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const probe = spawnSync(health[0] === "node" ? process.execPath : health[0], health.slice(1), { env, encoding: "utf8", timeout: 10_000 });
  server.kill("SIGTERM");
  await new Promise((r) => server.once("exit", r));
  if (probe.status !== 0) throw new Error(`HEALTHCHECK failed (${probe.status}): ${probe.stderr}`);
  step("HEALTHCHECK passed; the server stopped on SIGTERM");
  step("image build steps: ok");
} catch (err) {
  console.error(`[image] FAILED: ${err.message}`);
  process.exitCode = 1;
} finally {
  if (keep) step(`kept ${work}`);
  else rmSync(work, { recursive: true, force: true });
}
