#!/usr/bin/env node
// The same verdict on a quiet machine and a busy one: runs each test file alone, a number of
// times on the machine as it is ("quiet") and a number of times beside a CPU hog that keeps
// every core busy ("busy": Debian's stress-ng, started before each run and stopped after it
// by its PID). Prints, and writes with --out, a markdown table: file, mode, passes, and each
// run's time. Exits 1 when any run failed. packages/bench/results/load-matrix.md keeps the last table.
//
//   node infra/scripts/load-matrix.mjs [--runs 3] [--modes quiet,busy] [--out FILE] [DIR_OR_FILE...]
//
// Default files: every test in packages/server/test/reliability and test/integration. Run it
// on an otherwise idle machine: "quiet" means nothing else is running.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const SERVER = join(ROOT, "packages/server");

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(`--${name}`);
  if (at === -1) return fallback;
  const [value] = args.splice(at, 2).slice(1);
  return value;
};
const runs = Number(option("runs", "3"));
const modes = option("modes", "quiet,busy").split(",");
const out = option("out", undefined);
const roots = args.length > 0 ? args : ["test/reliability", "test/integration"];

const files = roots
  .flatMap((root) => {
    const path = resolve(SERVER, root);
    if (!statSync(path).isDirectory()) return [path];
    return readdirSync(path)
      .filter((name) => name.endsWith(".test.ts"))
      .map((name) => join(path, name));
  })
  .map((path) => relative(SERVER, path))
  .sort();

if (modes.includes("busy") && spawnSync("stress-ng", ["--version"]).status !== 0) {
  console.error("stress-ng is missing: apt-get install stress-ng");
  process.exit(2);
}
if (!existsSync(join(SERVER, "dist/main.js"))) {
  console.error("build first: pnpm build");
  process.exit(2);
}

/** One run of one file: passed, seconds, and the failure's first lines. */
function runFile(file) {
  return new Promise((done) => {
    const started = performance.now();
    const child = spawn("pnpm", ["exec", "jest", file], {
      cwd: SERVER,
      env: process.env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk) => (output += chunk));
    child.stderr.on("data", (chunk) => (output += chunk));
    child.on("exit", (code) => {
      const seconds = (performance.now() - started) / 1000;
      const failure = code === 0 ? "" : (output.match(/●[^\n]*\n(?:[^\n]*\n){0,12}/)?.[0] ?? output.slice(-1500));
      done({ passed: code === 0, seconds, failure });
    });
  });
}

/** Starts the CPU hog: one busy worker per core. Returns its stop function. */
function startHog() {
  const hog = spawn("stress-ng", ["--cpu", String(availableParallelism()), "--quiet"], { stdio: "ignore" });
  return () =>
    new Promise((stopped) => {
      if (hog.exitCode !== null) return stopped();
      hog.once("exit", () => stopped());
      // stress-ng stops its workers on SIGTERM.
      hog.kill("SIGTERM");
    });
}

const rows = [];
let failed = 0;
for (const file of files) {
  for (const mode of modes) {
    const results = [];
    for (let i = 0; i < runs; i++) {
      const stop = mode === "busy" ? startHog() : undefined;
      const result = await runFile(file);
      await stop?.();
      results.push(result);
      if (!result.passed) {
        failed++;
        console.error(`FAILED ${file} (${mode}, run ${i + 1}):\n${result.failure}`);
      }
    }
    const passes = results.filter((r) => r.passed).length;
    const row = `| ${file} | ${mode} | ${passes}/${runs} | ${results.map((r) => `${r.seconds.toFixed(0)}${r.passed ? "" : " ✗"}`).join(", ")} |`;
    console.log(row);
    rows.push(row);
  }
}

const table = [
  `node infra/scripts/load-matrix.mjs --runs ${runs} --modes ${modes.join(",")} ${roots.join(" ")}`,
  "",
  "| file | mode | passed | seconds per run |",
  "|---|---|---|---|",
  ...rows,
  "",
].join("\n");
if (out) writeFileSync(out, table);
console.log(`\n${table}`);
process.exit(failed > 0 ? 1 : 0);
