// `pnpm --filter @duet/bench scrape-flood [baseline dist] [--rounds N] [--seconds S] [--smoke]`: what a flood
// of scrapes on a node's metrics listener (METRICS_PORT) costs the agents on its public port.
// One duet node on the run's own Redis (METRICS_CACHE_MS at its default, 1 s); a bystander
// agent calls GET /v1/status of its room one call at a time (5 ms apart), and in each round
// a calm phase and a flood phase (the order alternating round to round), the flood being 16
// keep-alive connections each asking GET /metrics again as soon as its answer is read. The
// machine is shared and noisy, so the figure is the ratio of medians over the rounds: the
// median of the bystander's p99 under the flood over the median of its p99 calm, and the
// median of the per-round ratios. Given a baseline dist (a copy of an older
// packages/server/dist placed in packages/server, as for `ab`), that build is measured too, in
// the same run, rounds interleaved. Writes results/scrape-flood.md (with --smoke: one short
// round, checked only for having measured something).
import { type ChildProcess, fork } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg, setPriority } from "node:os";
import { join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { Pool } from "undici";
import { USER_AGENT } from "@duet/protocol";
import { LOAD_CPU, duetEnv, pin, startRedis, startServer, type ServerProcess } from "./processes.js";
import { median, sleep, summarize } from "./stats.js";

const args = process.argv.slice(2);
const smoke = args.includes("--smoke");
const numberArg = (name: string, fallback: number) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const ROUNDS = numberArg("--rounds", smoke ? 1 : 7);
const PHASE_SECONDS = numberArg("--seconds", smoke ? 1 : 4);
const FLOOD_CONNECTIONS = 16;
/** A copy of an older packages/server/dist (as for `ab` and `hostile`), measured in the same run. */
const baselineDist = args.find((a, i) => !a.startsWith("--") && !["--rounds", "--seconds"].includes(args[i - 1] ?? ""));

interface Seat {
  code: string;
  token: string;
}

interface Phase {
  latency: ReturnType<typeof summarize>;
  scrapes: number;
  scrapeBytes: number;
  eldMaxMs: number;
  /** The node's CPU time over the phase's wall time (1 = one core busy). */
  cpu: number;
}

async function openRoom(url: string): Promise<Seat> {
  const post = async (path: string, body: unknown) => {
    const response = await fetch(`${url}${path}`, {
      method: "POST",
      headers: { "user-agent": USER_AGENT, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    if (!response.ok) throw new Error(`${path} answered ${response.status}: ${await response.text()}`);
    return (await response.json()) as { code: string; token: string };
  };
  const opened = await post("/v1/open", {});
  await post("/v1/join", { code: opened.code });
  return { code: opened.code, token: opened.token };
}

async function bystander(url: string, seat: Seat, untilMs: number): Promise<number[]> {
  const pool = new Pool(url, { connections: 1, keepAliveTimeout: 60_000 });
  const samples: number[] = [];
  const path = `/v1/status?code=${encodeURIComponent(seat.code)}`;
  const headers = { "user-agent": USER_AGENT, authorization: `Bearer ${seat.token}` };
  try {
    while (performance.now() < untilMs) {
      const started = performance.now();
      const response = await pool.request({ method: "GET", path, headers });
      await response.body.text();
      if (response.statusCode !== 200) throw new Error(`bystander: /v1/status answered ${response.statusCode}`);
      samples.push(performance.now() - started);
      await sleep(5);
    }
  } finally {
    await pool.close();
  }
  return samples;
}

/** 16 keep-alive connections, each scraping again as soon as its answer is read. */
async function flood(metricsUrl: string, seconds: number): Promise<{ scrapes: number; bytes: number }> {
  const untilMs = performance.now() + seconds * 1000;
  const pool = new Pool(metricsUrl, { connections: FLOOD_CONNECTIONS, keepAliveTimeout: 60_000 });
  let scrapes = 0;
  let bytes = 0;
  try {
    await Promise.all(
      Array.from({ length: FLOOD_CONNECTIONS }, async () => {
        while (performance.now() < untilMs) {
          // What Prometheus sends: it accepts the text format and gzip.
          const response = await pool.request({
            method: "GET",
            path: "/metrics",
            headers: { accept: "text/plain;version=0.0.4;q=1,*/*;q=0.1", "accept-encoding": "gzip" },
          });
          const body = Buffer.from(await response.body.arrayBuffer());
          if (response.statusCode !== 200) throw new Error(`flood: /metrics answered ${response.statusCode}`);
          scrapes++;
          bytes += body.length;
        }
      }),
    );
  } finally {
    await pool.close();
  }
  return { scrapes, bytes };
}

/**
 * The flood runs in a process of its own, at a lower priority than this one: reading 16
 * answers back to back would otherwise delay the bystander's own event loop, and its
 * latency would be the load generator's rather than the node's.
 */
function floodProcess(): {
  run(metricsUrl: string, seconds: number): Promise<{ scrapes: number; bytes: number }>;
  stop(): void;
} {
  const child: ChildProcess = fork(__filename, ["--flood-child"], { stdio: ["ignore", "ignore", "inherit", "ipc"] });
  pin(child.pid!, LOAD_CPU);
  try {
    setPriority(child.pid!, 10);
  } catch {
    /* not allowed here: it then competes at the same priority */
  }
  return {
    run: (metricsUrl, seconds) =>
      new Promise((resolve, reject) => {
        const onExit = (code: number | null) => reject(new Error(`the flood process exited (${code})`));
        child.once("exit", onExit);
        child.once("message", (result: { scrapes: number; bytes: number }) => {
          child.off("exit", onExit);
          resolve(result);
        });
        child.send({ metricsUrl, seconds });
      }),
    stop: () => void child.kill(),
  };
}

if (args.includes("--flood-child")) {
  process.on("message", (job: { metricsUrl: string; seconds: number }) => {
    void flood(job.metricsUrl, job.seconds).then((result) => process.send!(result));
  });
  process.on("disconnect", () => process.exit(0));
}

type Flooder = ReturnType<typeof floodProcess>;

async function phase(server: ServerProcess, seat: Seat, flooder: Flooder | undefined): Promise<Phase> {
  const before = await server.metrics({ resetEld: true });
  const started = performance.now();
  const until = started + PHASE_SECONDS * 1000;
  const [samples, scraped] = await Promise.all([
    bystander(server.url, seat, until),
    flooder ? flooder.run(server.metricsUrl!, PHASE_SECONDS) : Promise.resolve({ scrapes: 0, bytes: 0 }),
  ]);
  const after = await server.metrics({ resetEld: true });
  const cpuUs = after.cpuUserUs + after.cpuSystemUs - before.cpuUserUs - before.cpuSystemUs;
  return {
    latency: summarize(samples),
    scrapes: scraped.scrapes,
    scrapeBytes: scraped.bytes,
    eldMaxMs: after.eldMaxMs,
    cpu: cpuUs / 1000 / (performance.now() - started),
  };
}

const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(1) : "–");

interface Build {
  name: string;
  server: ServerProcess;
  seat: Seat;
  rounds: { calm: Phase; flood: Phase }[];
}

function summary(build: Build) {
  const calmP99 = median(build.rounds.map((r) => r.calm.latency.p99));
  const floodP99 = median(build.rounds.map((r) => r.flood.latency.p99));
  return {
    calmP99,
    floodP99,
    ratioOfMedians: floodP99 / calmP99,
    medianRatio: median(build.rounds.map((r) => r.flood.latency.p99 / r.calm.latency.p99)),
    scrapesPerSecond: median(build.rounds.map((r) => r.flood.scrapes / PHASE_SECONDS)),
    scrapeKb: median(build.rounds.map((r) => r.flood.scrapeBytes / Math.max(1, r.flood.scrapes) / 1024)),
  };
}

async function main(): Promise<void> {
  pin(process.pid, LOAD_CPU);
  const load = loadavg()[0]!.toFixed(1);
  const redis = await startRedis();
  const builds: Build[] = [];
  const flooder = floodProcess();
  try {
    // METRICS_CACHE_MS is left at the node's default: the setting under test. With a baseline
    // dist, both builds run at once (one idle while the other is measured), rounds interleaved.
    const starts: [string, Record<string, string>][] = [["current", { REDIS_KEY_PREFIX: "cur:" }]];
    if (baselineDist) starts.push(["baseline", { REDIS_KEY_PREFIX: "base:", DUET_SERVER_DIST: resolve(baselineDist) }]);
    for (const [name, env] of starts) {
      const server = await startServer(`duet (${name})`, "duet-node.js", {
        env: duetEnv(redis.url, { LOG_LEVEL: "warn", ...env }),
      });
      if (!server.metricsUrl) throw new Error(`${name}: the node reported no metrics listener`);
      const seat = await openRoom(server.url);
      await phase(server, seat, undefined); // warm up
      builds.push({ name, server, seat, rounds: [] });
    }
    for (let round = 0; round < ROUNDS; round++) {
      for (const build of round % 2 === 0 ? builds : [...builds].reverse()) {
        // Alternate which phase comes first, so a drift of the machine's load favours neither.
        const order = round % 2 === 0 ? [false, true] : [true, false];
        const result: Partial<{ calm: Phase; flood: Phase }> = {};
        for (const flooded of order)
          result[flooded ? "flood" : "calm"] = await phase(build.server, build.seat, flooded ? flooder : undefined);
        build.rounds.push(result as { calm: Phase; flood: Phase });
        if (!smoke)
          process.stderr.write(
            `round ${round + 1} ${build.name}: p99 calm ${ms(result.calm!.latency.p99)} ms, flood ${ms(result.flood!.latency.p99)} ms (${result.flood!.scrapes} scrapes)\n`,
          );
      }
    }
    if (smoke) {
      const only = builds[0]!;
      const { calmP99, floodP99 } = summary(only);
      if (only.rounds[0]!.flood.scrapes === 0 || only.rounds[0]!.flood.latency.count === 0)
        throw new Error("scrape-flood smoke: nothing measured");
      process.stdout.write(
        `scrape-flood smoke: bystander p99 ${ms(calmP99)} ms calm, ${ms(floodP99)} ms under ${only.rounds[0]!.flood.scrapes} scrapes\n`,
      );
      return;
    }
    const headline = builds.map((build) => {
      const s = summary(build);
      return (
        `- **${build.name}: median p99 ${ms(s.calmP99)} ms calm, ${ms(s.floodP99)} ms under the flood: ${s.ratioOfMedians.toFixed(2)}×** ` +
        `(median of the per-round ratios ${s.medianRatio.toFixed(2)}×); ${Math.round(s.scrapesPerSecond)} scrapes/s of ${s.scrapeKb.toFixed(1)} KB.`
      );
    });
    const rows = builds.flatMap((build) =>
      build.rounds.flatMap((r, i) =>
        (["calm", "flood"] as const).map((when) => {
          const p = r[when];
          return `| ${build.name} | ${i + 1} | ${when} | ${p.latency.count} | ${ms(p.latency.p50)} | ${ms(p.latency.p99)} | ${ms(p.latency.max)} | ${when === "flood" ? Math.round(p.scrapes / PHASE_SECONDS) : "–"} | ${ms(p.eldMaxMs)} | ${Math.round(p.cpu * 100)} % |`;
        }),
      ),
    );
    const report = [
      "# Scrape flood: a bystander's latency on the public port",
      "",
      `\`pnpm --filter @duet/bench scrape-flood${baselineDist ? ` ${baselineDist}` : ""} --rounds ${ROUNDS} --seconds ${PHASE_SECONDS}\`: a duet node on Redis per build (METRICS_CACHE_MS at its default, 1 s),`,
      `a bystander's GET /v1/status one at a time 5 ms apart; each round ${PHASE_SECONDS} s calm and ${PHASE_SECONDS} s while ${FLOOD_CONNECTIONS} keep-alive connections`,
      "scrape the metrics listener back to back (gzip accepted, as Prometheus does), the order of phases and builds alternating round to round.",
      `${cpus().length} cores, loadavg ${load} at the start; the nodes pinned to one core, the bystander, Redis and the flood (a process of its own at a lower priority, so that the generator's own CPU is not counted against the relay) to the other.`,
      "",
      ...headline,
      "",
      "| build | round | phase | bystander calls | p50 ms | p99 ms | max ms | scrapes/s | node's event-loop delay, max ms | node's CPU |",
      "|---|---|---|---|---|---|---|---|---|---|",
      ...rows,
      "",
    ].join("\n");
    const dir = join(__dirname, "..", "results");
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "scrape-flood.md"), report);
    process.stdout.write(`${report}\n`);
  } finally {
    flooder.stop();
    await Promise.allSettled(builds.map((build) => build.server.stop()));
    await redis.stop();
  }
}

if (!args.includes("--flood-child"))
  main().then(
    () => process.exit(0),
    (error) => {
      process.stderr.write(`scrape-flood failed: ${error instanceof Error ? error.stack : String(error)}\n`);
      process.exit(1);
    },
  );
