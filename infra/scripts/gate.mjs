#!/usr/bin/env node
// duet's gates: what `pnpm check`, `pnpm test` and CI (.ci/run) run, as lanes of steps.
//
//   node infra/scripts/gate.mjs check   typecheck, lint, unit tests, the behaviour suite on the
//                                       in-process store, one Redis and three nodes on the Cluster
//   node infra/scripts/gate.mjs test    every package's tests (pnpm test, the README's command)
//   node infra/scripts/gate.mjs ci      typecheck, lint and every test on the pinned Node (the
//                                       image's runtime), plus the Node 20 lane (the relay's
//                                       HTTP timeouts, the protocol, SDK and served CLI)
//
// Every plan builds first, then runs its lanes at once; the steps of a lane run one after
// the other, and a failed step does not stop the others (the run fails at the end). Lanes are
// split where they share nothing: each test run starts its own Redis servers, relays and
// nginx on ports of its own, and only deploy-tests uses the Docker engine. Each output line
// comes as it is written, after its lane's name; at the end, every step with its time and
// the machine's load average. Where a new kind of test goes: CONTRIBUTING.md.
//
// Every step runs on the Node that runs this script: through `pnpm test` that is the pinned
// runtime (the root devDependency `node`, docs/runtime.md), whatever Node the machine has.
// The Node 20 lane alone runs on a Node 20: DUET_NODE20_DIR, or the first `node` on PATH
// outside node_modules that is Node 20.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { delimiter, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

/** The behaviour targets of `pnpm check` (packages/server/test/support/selection.ts names them all). */
export const CHECK_TARGETS = "memory,redis,cluster-3-nodes";
/**
 * The behaviour targets of CI: both stores, three nodes on one Redis and on a Cluster (every
 * call lands on one node in turn, so one node's paths run too). `pnpm test` adds the one-node
 * targets, Sentinel and the built server as a process; in CI those run elsewhere: Sentinel in
 * the integration, failover, partition and read-your-writes tests, the built server in the
 * client's integration tests and the deploy tests. Two cores hold no more in ten minutes.
 */
export const CI_TARGETS = "memory,redis-3-nodes,cluster-3-nodes";

const step = (name, command, env = {}) => ({ name, command, env });
/**
 * Jest on the `node` first on the step's PATH. Not through pnpm, whose scripts put
 * node_modules/.bin (the pinned runtime's `node`) first: the Node 20 lane runs it this way.
 */
const JEST = "node ../../node_modules/jest/bin/jest.js";

/** Every package's tests but the server's and deploy-tests' (protocol, client, bench, and any new one). */
const otherPackages = step(
  "protocol, client, bench tests",
  "pnpm -r --filter '!@duet/server' --filter '!@duet/deploy-tests' --workspace-concurrency=1 --no-bail test",
);
// The server's tests in two runs: the fault-injection tests apart (last in `pnpm test`; in
// CI a lane of their own that the other lanes yield to), so their timing is not shared with
// the rest of the gate's load.
const serverTests = [
  step(
    "server tests but reliability (unit, behaviour on every target, integration, browser)",
    "pnpm --filter @duet/server exec jest --testPathPatterns '^(?!.*test/reliability/)'",
  ),
  step(
    "server reliability tests (faults, fuzzing, properties, security)",
    "pnpm --filter @duet/server exec jest test/reliability",
  ),
];
const deployTests = step(
  "deploy-tests (topology through nginx, pnpm start, compose on Docker)",
  "pnpm --filter @duet/deploy-tests test",
);
const typecheck = step("typecheck", "pnpm -r typecheck");
const lint = step("lint (Biome, deployment files, OpenAPI)", "pnpm -s lint");
const prerequisites = (env = {}) => step("test prerequisites", "node infra/scripts/test-prerequisites.mjs", env);

const PLANS = {
  check: {
    first: [
      step("build", "pnpm -r --silent build"),
      // Only what these tests need: no browser, no Docker engine.
      prerequisites({ DUET_BROWSER_TESTS: "off", DUET_COMPOSE_TEST: "off" }),
    ],
    lanes: {
      static: [typecheck, lint],
      unit: [
        step(
          "protocol and client unit tests",
          "pnpm --filter @duet/protocol test && pnpm --filter @duet/client test:unit",
        ),
      ],
      server: [
        step(`server unit and behaviour tests (${CHECK_TARGETS})`, "pnpm --filter @duet/server test:check", {
          DUET_TARGETS: CHECK_TARGETS,
        }),
      ],
    },
  },
  test: {
    first: [step("build", "pnpm -r --silent build"), prerequisites()],
    lanes: { server: serverTests, deploy: [deployTests], packages: [otherPackages] },
  },
  ci: {
    first: [step("build", "pnpm -r --silent build"), prerequisites()],
    lanes: {
      // Every lane at the same priority: a test's verdict does not depend on the machine's load
      // (packages/bench/results/load-matrix.md has each file's verdicts, quiet and beside a CPU hog). Five
      // lanes keep both cores busy; more only stretched every lane (load averages of 15 to 25
      // with six or seven). The fault-injection tests (mostly waiting: faults last seconds).
      reliability: [serverTests[1]],
      // The pinned runtime, the image's: every test; the server's behaviour suite in a lane of
      // its own, on CI_TARGETS (its unit, store, browser and conformance tests end the Node 20
      // lane: after the suite here, they made this lane the gate's longest).
      server: [
        step(`server behaviour tests (${CI_TARGETS})`, "pnpm --filter @duet/server exec jest test/behaviour", {
          DUET_TARGETS: CI_TARGETS,
        }),
      ],
      deploy: [deployTests],
      // The client's integration tests are the longest of this lane: typecheck and lint run
      // in the Node 20 lane, which ends early.
      packages: [otherPackages],
      // Node 20, the oldest Node an agent may run the SDK and the served CLI on: the protocol,
      // the SDK's and CLI's units and the served one-file CLI; and the relay's HTTP timeouts
      // in-process, where Node's HTTP server differs most between majors (Node 20 once
      // answered bare 408s). Everything else runs on the pinned runtime: typecheck, lint and
      // the server's integration, unit, store, browser and conformance tests after these here.
      node20: [
        {
          ...step("server HTTP timeouts (in-process)", `cd packages/server && ${JEST} test/behaviour/http-timeouts`, {
            DUET_TARGETS: "memory",
          }),
          node20: true,
        },
        {
          ...step(
            "protocol, client unit and served-CLI tests",
            `(cd packages/protocol && ${JEST}) && cd packages/client && ${JEST} test/unit test/integration/bundle`,
          ),
          node20: true,
        },
        typecheck,
        lint,
        // The server's integration tests, then its unit, store, browser and conformance tests,
        // last here: this lane ended first (about 220 s of a 400 s run), and behind the fault
        // tests and the behaviour suite they made those lanes the gate's longest.
        step(
          "server integration tests (several nodes, outages, Sentinel, write-ack)",
          "pnpm --filter @duet/server exec jest test/integration",
        ),
        step(
          "server unit, store, browser and MCP conformance tests",
          "pnpm --filter @duet/server exec jest --testPathPatterns '^(?!.*test/(reliability|behaviour|integration)/)'",
        ),
      ],
    },
  },
};

const started = Date.now();
const scratch = mkdtempSync(join(tmpdir(), "duet-gate-"));
process.on("exit", () => rmSync(scratch, { recursive: true, force: true }));

/** The children's user + system seconds from the second line of bash's `times` ("0m12.5s 0m1.2s"). */
function cpuSeconds(file) {
  try {
    const children = readFileSync(file, "utf8").trim().split("\n")[1] ?? "";
    return [...children.matchAll(/(\d+)m([\d.]+)s/g)].reduce((sum, [, m, s]) => sum + Number(m) * 60 + Number(s), 0);
  } catch {
    return Number.NaN; // the step was killed before it could write them
  }
}
const since = (t) => `${Math.round((Date.now() - t) / 1000)} s`;
const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(", ");
const say = (line) => process.stdout.write(`${line}\n`);

/** The pinned major: the root devDependency `node` (package.json). */
const PINNED = Number(JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).devDependencies.node.split(".")[0]);

/** A directory holding a Node 20 `node`: DUET_NODE20_DIR, or one on PATH outside node_modules. */
function node20Dir() {
  const candidates = [process.env.DUET_NODE20_DIR, ...(process.env.PATH ?? "").split(delimiter)].filter(
    (dir) => dir && !dir.split(/[\\/]/).includes("node_modules"),
  );
  for (const dir of candidates) {
    const node = join(dir, "node");
    if (!existsSync(node)) continue;
    if (spawnSync(node, ["--version"], { encoding: "utf8" }).stdout?.startsWith("v20.")) return dir;
  }
  throw new Error(
    "the ci plan's Node 20 lane needs a Node 20: set DUET_NODE20_DIR to a directory holding its node binary",
  );
}

/** The PATH and version of the Node a step runs on: this one (the pinned runtime), or a Node 20. */
function nodeFor(stepSpec) {
  if (!stepSpec.node20) return { path: process.env.PATH, version: process.version };
  const dir = node20Dir();
  const version = spawnSync(join(dir, "node"), ["--version"], { encoding: "utf8" }).stdout.trim();
  return { path: `${dir}${delimiter}${process.env.PATH}`, version };
}

/**
 * Runs one step; every line of its output goes out after `[lane]`. Resolves with its result,
 * its CPU seconds among them: user + system time of every process it waited for (bash's
 * `times`; a Docker build runs in dockerd and is not counted).
 */
function run(lane, stepSpec) {
  const { path, version } = nodeFor(stepSpec);
  const t = Date.now();
  const label = `${stepSpec.name} (Node ${version.slice(1)})`;
  const timesFile = join(scratch, `${lane}-${t}.times`);
  say(`[${lane}] ▶ ${label}`);
  return new Promise((done) => {
    const script = `${stepSpec.command}\nrc=$?\ntimes > ${JSON.stringify(timesFile)}\nexit $rc`;
    const child = spawn("bash", ["-c", script], {
      cwd: ROOT,
      env: { ...process.env, ...stepSpec.env, PATH: path },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const output = []; // the step's last lines, for the summary if it fails
    const keep = (line) => {
      say(`[${lane}] ${line}`);
      output.push(line);
      if (output.length > 4000) output.splice(0, 1000);
    };
    for (const stream of [child.stdout, child.stderr]) {
      let pending = "";
      stream.on("data", (chunk) => {
        const lines = (pending + chunk).split("\n");
        pending = lines.pop();
        for (const line of lines) if (line.trim()) keep(line);
      });
      stream.on("end", () => pending.trim() && keep(pending));
    }
    child.on("close", (code, signal) => {
      const ok = code === 0;
      const cpu = cpuSeconds(timesFile);
      say(
        `[${lane}] ${ok ? "✓" : "✗"} ${label}: ${ok ? "passed" : `failed (${code ?? signal})`} in ${since(t)}, ${Math.round(cpu)} CPU-s`,
      );
      done({ lane, label, ok, seconds: (Date.now() - t) / 1000, cpu, output });
    });
  });
}

async function main() {
  // CI runs the README's `pnpm test` with DUET_GATE=ci: the same plan with the Node 20 lane
  // (.ci/run).
  const name = process.argv[2] === "test" && process.env.DUET_GATE === "ci" ? "ci" : process.argv[2];
  const plan = PLANS[name];
  if (!plan) {
    process.stderr.write(`usage: node infra/scripts/gate.mjs ${Object.keys(PLANS).join("|")}\n`);
    return 2;
  }
  // A gate on another runtime would test what nobody runs: `pnpm test`, not `node gate.mjs`.
  if (Number(process.versions.node.split(".")[0]) !== PINNED) {
    process.stderr.write(
      `gate: this is Node ${process.versions.node}; duet's runtime is Node ${PINNED} (the root devDependency \`node\`). Run it as \`pnpm ${name === "ci" ? "test" : name}\`, after \`pnpm install\`.\n`,
    );
    return 2;
  }
  say(`== ${name}: ${availableParallelism()} CPUs, load average ${load()} (1, 5, 15 min)`);
  const results = [];
  for (const first of plan.first) {
    const result = await run("setup", first);
    results.push(result);
    if (!result.ok) return summary(name, results); // nothing after it can run
  }
  const lanes = Object.entries(plan.lanes).map(async ([lane, steps]) => {
    for (const s of steps) results.push(await run(lane, s));
  });
  // A heartbeat while lanes run, for logs that would otherwise be quiet for minutes.
  const heartbeat = setInterval(() => say(`[gate] ${since(started)} so far, load average ${load()}`), 60_000);
  await Promise.all(lanes);
  clearInterval(heartbeat);
  return summary(name, results);
}

function summary(name, results) {
  const cpu = results.reduce((sum, r) => sum + (r.cpu || 0), 0);
  const verdict = results.every((r) => r.ok) ? "passed" : "FAILED";
  say(`\n== ${name}: ${verdict} in ${since(started)}, ${Math.round(cpu)} CPU-s, load average ${load()}`);
  for (const r of results)
    say(
      `  ${r.ok ? "ok  " : "FAIL"} ${String(Math.round(r.seconds)).padStart(4)} s ${String(Math.round(r.cpu)).padStart(5)} CPU-s  [${r.lane}] ${r.label}`,
    );
  // What failed, again at the end: a CI log is often read from its tail only.
  for (const r of results.filter((r) => !r.ok))
    say(`\n== why [${r.lane}] ${r.label} failed:\n${failureExcerpt(r.output)}`);
  return results.every((r) => r.ok) ? 0 : 1;
}

/** jest's failure headings ("● suite › test") with the lines after each; else the last lines. */
function failureExcerpt(lines = []) {
  const headings = lines.flatMap((line, i) => (/^\s*● /.test(line) ? [i] : []));
  if (headings.length === 0) return lines.slice(-20).join("\n");
  return headings
    .slice(0, 4)
    .map((i) => lines.slice(i, i + 8).join("\n"))
    .join("\n");
}

process.exitCode = await main();
