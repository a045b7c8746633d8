#!/usr/bin/env node
// duet's gates: what `pnpm check`, `pnpm test` and CI (.ci/run) run, as lanes of steps.
//
//   node infra/scripts/gate.mjs check   typecheck, lint, unit tests, the behaviour suite on the
//                                       in-process store, one Redis and three nodes on the Cluster
//   node infra/scripts/gate.mjs test    every package's tests (pnpm test, the README's command)
//   node infra/scripts/gate.mjs ci      typecheck, lint and every test on Node 24 (the image's
//                                       runtime, DUET_NODE24_DIR), plus the Node 20 lane (the
//                                       relay as a process, the protocol, SDK and CLI)
//
// Every plan builds first, then runs its lanes at once; the steps of a lane run one after
// the other, and a failed step does not stop the others (the run fails at the end). Lanes are
// split where they share nothing: each test run starts its own Redis servers, relays and
// nginx on ports of its own, and only deploy-tests uses the Docker engine. Each output line
// comes as it is written, after its lane's name; at the end, every step with its time and
// the machine's load average. Where a new kind of test goes: CONTRIBUTING.md.
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { delimiter, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

/** The behaviour targets of `pnpm check` (packages/server/test/support/selection.ts names them all). */
export const CHECK_TARGETS = "memory,redis,cluster-3-nodes";

const step = (name, command, env = {}) => ({ name, command, env });

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
      // The fault-injection tests, then the integration tests (recovery bounds, wake-up races
      // across nodes, Sentinel, write-ack), measure seconds against real Redis, Sentinel and
      // Cluster processes (Sentinel stops acting for 30 s when its own timers run 2 s late):
      // they run at normal priority, every other lane at nice 10, so on two cores the other
      // lanes take what these leave instead of starving them.
      reliability: [
        { ...serverTests[1], node24: true },
        {
          ...step(
            "server integration tests (several nodes, outages, Sentinel, write-ack)",
            "pnpm --filter @duet/server exec jest test/integration",
          ),
          node24: true,
        },
      ],
      // Node 24, the runtime of the image: every test; the server's behaviour suite on all
      // seven targets in a lane of its own.
      server: [
        {
          ...step("server behaviour tests on every target", "pnpm --filter @duet/server exec jest test/behaviour"),
          node24: true,
          nice: true,
        },
      ],
      unit: [
        {
          ...step(
            "server unit, store, browser and MCP conformance tests",
            "pnpm --filter @duet/server exec jest --testPathPatterns '^(?!.*test/(reliability|behaviour|integration)/)'",
          ),
          node24: true,
          nice: true,
        },
      ],
      deploy: [{ ...deployTests, node24: true, nice: true }],
      packages: [
        { ...typecheck, nice: true },
        { ...lint, nice: true },
        { ...otherPackages, node24: true, nice: true },
      ],
      // Node 20 while these machines ship it, only where it can find what Node 24 cannot: its
      // HTTP server's own timeouts (the in-process relay, where Node 20 once answered bare
      // 408s), and what runs on a user's machine (the protocol, the SDK's and CLI's units, the
      // served one-file CLI). The relay's logic is the same JavaScript on both: Node 24 runs
      // it on every target, the built relay as a process included.
      node20: [
        step("server HTTP timeouts (in-process)", "pnpm --filter @duet/server exec jest test/behaviour/http-timeouts", {
          DUET_TARGETS: "memory",
        }),
        step(
          "protocol, client unit and served-CLI tests",
          "pnpm --filter @duet/protocol test && pnpm --filter @duet/client exec jest test/unit test/integration/bundle",
        ),
      ].map((s) => ({ ...s, nice: true })),
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

/** The PATH and version of the Node a step runs on: this one, or Node 24 from DUET_NODE24_DIR. */
function nodeFor(stepSpec) {
  if (!stepSpec.node24) return { path: process.env.PATH, version: process.version };
  const dir = process.env.DUET_NODE24_DIR;
  if (!dir) throw new Error("the ci plan runs Node 24 from DUET_NODE24_DIR (a directory holding its node binary)");
  const version = spawnSync(join(dir, "node"), ["--version"], { encoding: "utf8" }).stdout?.trim();
  if (!version?.startsWith("v24.")) throw new Error(`${join(dir, "node")} is not Node 24 (${version || "no answer"})`);
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
  const label = `${stepSpec.name} (Node ${version.slice(1)}${stepSpec.nice ? ", nice 10" : ""})`;
  const timesFile = join(scratch, `${lane}-${t}.times`);
  say(`[${lane}] ▶ ${label}`);
  return new Promise((done) => {
    const script = `${stepSpec.command}\nrc=$?\ntimes > ${JSON.stringify(timesFile)}\nexit $rc`;
    // nice: the step (and every process it starts) yields the CPU to steps without it.
    const [command, args] = stepSpec.nice ? ["nice", ["-n", "10", "bash", "-c", script]] : ["bash", ["-c", script]];
    const child = spawn(command, args, {
      cwd: ROOT,
      env: { ...process.env, ...stepSpec.env, PATH: path },
      stdio: ["ignore", "pipe", "pipe"],
    });
    for (const stream of [child.stdout, child.stderr]) {
      let pending = "";
      stream.on("data", (chunk) => {
        const lines = (pending + chunk).split("\n");
        pending = lines.pop();
        for (const line of lines) if (line.trim()) say(`[${lane}] ${line}`);
      });
      stream.on("end", () => pending.trim() && say(`[${lane}] ${pending}`));
    }
    child.on("close", (code, signal) => {
      const ok = code === 0;
      const cpu = cpuSeconds(timesFile);
      say(
        `[${lane}] ${ok ? "✓" : "✗"} ${label}: ${ok ? "passed" : `failed (${code ?? signal})`} in ${since(t)}, ${Math.round(cpu)} CPU-s`,
      );
      done({ lane, label, ok, seconds: (Date.now() - t) / 1000, cpu });
    });
  });
}

async function main() {
  // CI runs the README's `pnpm test` with DUET_GATE=ci: the same plan with the Node 24 pass
  // and the Node 20 lane (.ci/run).
  const name = process.argv[2] === "test" && process.env.DUET_GATE === "ci" ? "ci" : process.argv[2];
  const plan = PLANS[name];
  if (!plan) {
    process.stderr.write(`usage: node infra/scripts/gate.mjs ${Object.keys(PLANS).join("|")}\n`);
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
  return results.every((r) => r.ok) ? 0 : 1;
}

process.exitCode = await main();
