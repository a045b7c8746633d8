// `pnpm bench`: every scenario in one run, on our own Redis, with the servers as child
// processes; writes results/latest.json, results/latest.md and results/chart.svg and prints
// the table. `--smoke` runs each scenario for a moment (CI: the harness cannot rot) and
// writes to results/smoke/ instead.
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import { join } from "node:path";
import { LOAD_CPU, duetEnv, pin, pinningWorks, startRedis, startServer, type ServerProcess } from "./processes.js";
import { chart, markdown, TARGET_NAMES, type RunResults, type Target, type TargetCheck } from "./report.js";
import { runCapacity } from "./scenarios/capacity.js";
import { runCycle, type CycleResult } from "./scenarios/message-cycle.js";
import { commandStats, costOf, quietLives, redisCpuSeconds, type CommandStats } from "./scenarios/redis-cost.js";
import { bareWakes, duetWakes, summarizeWakes } from "./scenarios/wake.js";
import { median } from "./stats.js";

const smoke = process.argv.includes("--smoke");
const PLAN = smoke
  ? {
      levels: [1, 4],
      warmupMs: 200,
      measureMs: 500,
      rounds: 1,
      roundMs: 500,
      wakes: 30,
      capacity: [200],
      capacityWindowMs: 1000,
      lives: 10,
    }
  : {
      levels: [1, 2, 4, 8, 16, 32, 64, 128, 256],
      warmupMs: 500,
      measureMs: 2000,
      rounds: 7,
      roundMs: 2000,
      wakes: 1000,
      capacity: [1000, 5000, 10000],
      capacityWindowMs: 6000,
      lives: 300,
    };
const TARGETS: Target[] = ["duet", "express", "http"];

// A smoke run (part of `pnpm test`) says one line when it passes; its progress lines and
// the table are printed only when it fails, or with DUET_FIGURES=1.
const quiet = smoke && process.env.DUET_FIGURES !== "1";
const kept: string[] = [];
const log = (line: string) => {
  const text = `[bench ${new Date().toISOString().slice(11, 19)}] ${line}\n`;
  if (quiet) kept.push(text);
  else process.stderr.write(text);
};

function machine(): string {
  const list = cpus();
  return `${list.length} x ${list[0]?.model.trim() ?? "unknown CPU"}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB RAM`;
}

async function main(): Promise<void> {
  const started = Date.now();
  // The machine is shared: other work running beside the bench shows in os.loadavg().
  const loadBefore = loadavg()[0]!;
  pin(process.pid, LOAD_CPU);
  const redis = await startRedis();
  const servers: ServerProcess[] = [];
  const stopAll = async () => {
    await Promise.allSettled(servers.splice(0).map((s) => s.stop()));
  };
  try {
    const redisVersion = /redis_version:(\S+)/.exec(await redis.client.info("server"))?.[1] ?? "?";
    log(`redis ${redisVersion} at ${redis.url}; pinning ${pinningWorks() ? "on" : "off"}`);
    const duet = await startServer("duet", "duet-node.js", { env: duetEnv(redis.url) });
    const express = await startServer("bare Express", "ceiling-node.js", {
      args: ["express"],
      env: { REDIS_URL: redis.url },
    });
    const http = await startServer("bare node:http", "ceiling-node.js", {
      args: ["http"],
      env: { REDIS_URL: redis.url },
    });
    servers.push(duet, express, http);
    const origin: Record<Target, string> = { duet: duet.url, express: express.url, http: http.url };
    const process_: Record<Target, ServerProcess> = { duet, express, http };

    // ---- 1 + 5: message cycle, sweep then interleaved rounds --------------------------------
    const sweep: Record<Target, CycleResult[]> = { duet: [], express: [], http: [] };
    const flat: Record<Target, number> = { duet: 0, express: 0, http: 0 };
    for (const [index, rooms] of PLAN.levels.entries()) {
      // A server is done once three levels in a row did not beat its best by 5 %: on this
      // noisy machine one flat level is often just a bad second.
      const active = TARGETS.filter((t) => flat[t] < 3);
      if (active.length === 0) break;
      // Rotate the order so no server always runs right after another's load.
      for (const t of [...active.slice(index % active.length), ...active.slice(0, index % active.length)]) {
        const result = await runCycle(origin[t], rooms, {
          warmupMs: PLAN.warmupMs,
          measureMs: PLAN.measureMs,
          server: process_[t],
        });
        const best = Math.max(0, ...sweep[t].map((c) => c.messagesPerSecond));
        flat[t] = result.messagesPerSecond > best * 1.05 ? 0 : flat[t] + 1;
        sweep[t].push(result);
        log(
          `cycle ${TARGET_NAMES[t]} rooms=${rooms}: ${result.messagesPerSecond.toFixed(0)} msg/s, p50 ${result.p50Ms.toFixed(2)} ms, p99 ${result.p99Ms.toFixed(2)} ms, ` +
            `server ${result.serverCpuUsPerMessage?.toFixed(0)} us/msg at ${((result.serverCpuShare ?? 0) * 100).toFixed(0)} % CPU, generator ${(result.generatorCpuShare * 100).toFixed(0)} % CPU, errors ${result.errors}`,
        );
      }
    }
    const peakOf = (t: Target) => sweep[t].reduce((a, b) => (b.messagesPerSecond > a.messagesPerSecond ? b : a));
    const peak = { duet: peakOf("duet"), express: peakOf("express"), http: peakOf("http") };
    // Rounds at the middle one of the three peak concurrencies: saturating, and one peak that
    // noise pushed far out does not drag every round to hundreds of rooms.
    const roundRooms = [peak.duet.rooms, peak.express.rooms, peak.http.rooms].sort((a, b) => a - b)[1]!;
    const perRound: Record<Target, CycleResult[]> = { duet: [], express: [], http: [] };
    for (let round = 0; round < PLAN.rounds; round++) {
      for (const t of [...TARGETS.slice(round % 3), ...TARGETS.slice(0, round % 3)]) {
        perRound[t].push(
          await runCycle(origin[t], roundRooms, {
            warmupMs: PLAN.warmupMs,
            measureMs: PLAN.roundMs,
            server: process_[t],
          }),
        );
      }
      log(
        `round ${round + 1}/${PLAN.rounds} at ${roundRooms} rooms: ${TARGETS.map((t) => `${t} ${perRound[t].at(-1)!.messagesPerSecond.toFixed(0)}`).join(", ")} msg/s`,
      );
    }
    const summary = (t: Target) => ({
      messagesPerSecond: median(perRound[t].map((c) => c.messagesPerSecond)),
      p50Ms: median(perRound[t].map((c) => c.p50Ms)),
      p99Ms: median(perRound[t].map((c) => c.p99Ms)),
      serverCpuUsPerMessage: median(perRound[t].map((c) => c.serverCpuUsPerMessage ?? Number.NaN)),
      serverCpuShare: median(perRound[t].map((c) => c.serverCpuShare ?? Number.NaN)),
      generatorCpuShare: median(perRound[t].map((c) => c.generatorCpuShare)),
      // Per-round ratios, then their median: each round's three runs saw the same noise.
      ratioToExpress: median(perRound[t].map((c, i) => c.messagesPerSecond / perRound.express[i]!.messagesPerSecond)),
      ratioToHttp: median(perRound[t].map((c, i) => c.messagesPerSecond / perRound.http[i]!.messagesPerSecond)),
      all: perRound[t].map((c) => Math.round(c.messagesPerSecond)),
    });
    const rounds = {
      rooms: roundRooms,
      count: PLAN.rounds,
      perTarget: { duet: summary("duet"), express: summary("express"), http: summary("http") },
    };
    // Per-round ratios, then their median: each round's three runs saw the same noise.
    const ratioIn = (other: Target) =>
      median(perRound.duet.map((c, i) => c.messagesPerSecond / perRound[other][i]!.messagesPerSecond));
    const ratios = {
      toExpress: ratioIn("express"),
      toHttp: ratioIn("http"),
      peakToExpress: peak.duet.messagesPerSecond / peak.express.messagesPerSecond,
      peakToHttp: peak.duet.messagesPerSecond / peak.http.messagesPerSecond,
      // CPU per message is steadier than throughput on a machine with CPU steal: it is the
      // inverse of the throughput a saturated core would reach.
      cpuToExpress: median(
        perRound.duet.map(
          (c, i) =>
            (perRound.express[i]!.serverCpuUsPerMessage ?? Number.NaN) / (c.serverCpuUsPerMessage ?? Number.NaN),
        ),
      ),
      cpuToHttp: median(
        perRound.duet.map(
          (c, i) => (perRound.http[i]!.serverCpuUsPerMessage ?? Number.NaN) / (c.serverCpuUsPerMessage ?? Number.NaN),
        ),
      ),
    };

    // ---- 4: Redis cost, on a Redis and a node of its own --------------------------------------
    // commandstats and INFO cpu are server-wide: the ceilings' and the cycle's lingering
    // subscriptions (dropped 30 s after their rooms' last recv) must not land in the counts.
    const costRedis = await startRedis();
    let quiet: Awaited<ReturnType<typeof quietLives>>;
    let underLoad: ReturnType<typeof costOf>;
    try {
      const costNode = await startServer("duet (Redis cost)", "duet-node.js", { env: duetEnv(costRedis.url) });
      servers.push(costNode);
      quiet = await quietLives(costNode, costRedis.client, PLAN.lives);
      // The bench runs with rate limits off; in production the per-IP limits count every room
      // call in Redis. Limits raised so that none trips: only their Redis cost shows.
      const limitedNode = await startServer("duet (rate limits on)", "duet-node.js", {
        env: duetEnv(costRedis.url, { RATE_LIMIT_REQUESTS: "100000000", RATE_LIMIT_ROOMS: "100000000" }),
      });
      servers.push(limitedNode);
      const [limited] = await quietLives(limitedNode, costRedis.client, PLAN.lives, 1);
      quiet.push({ ...limited!, shape: `${limited!.shape}, per-IP rate limits on` });
      await limitedNode.stop();
      let before: CommandStats = {};
      let cpuBefore = 0;
      let after: CommandStats = {};
      let cpuAfter = 0;
      const loaded = await runCycle(costNode.url, roundRooms, {
        warmupMs: PLAN.warmupMs,
        measureMs: PLAN.roundMs,
        onMeasureStart: async () => {
          [before, cpuBefore] = await Promise.all([commandStats(costRedis.client), redisCpuSeconds(costRedis.client)]);
        },
        onMeasureEnd: async () => {
          [after, cpuAfter] = await Promise.all([commandStats(costRedis.client), redisCpuSeconds(costRedis.client)]);
        },
      });
      // One life per send accepted in the window: in steady state as many are received and acked.
      underLoad = costOf(`message-cycle load, ${roundRooms} rooms`, loaded.sends, before, after, cpuAfter - cpuBefore);
      await costNode.stop();
    } finally {
      await costRedis.stop();
    }
    log(
      `redis cost: ${[...quiet, underLoad].map((c) => `${c.shape}: ${c.roundTripsTotal.toFixed(2)} trips`).join("; ")}`,
    );

    // ---- 2: wake latency ---------------------------------------------------------------------
    const duetB = await startServer("duet B", "duet-node.js", { env: duetEnv(redis.url) });
    const holder = await startServer("wake holder", "ceiling-node.js", {
      args: ["wake"],
      env: { REDIS_URL: redis.url },
    });
    const publisher = await startServer("wake publisher", "ceiling-node.js", {
      args: ["wake"],
      env: { REDIS_URL: redis.url },
    });
    servers.push(duetB, holder, publisher);
    // Interleaved in blocks, so a noisy minute does not land on one path only.
    const blocks = Math.max(1, Math.round(PLAN.wakes / 100));
    const per = Math.ceil(PLAN.wakes / blocks);
    const samples = { duet: [] as number[], bareHttp: [] as number[], bareDirect: [] as number[] };
    for (let block = 0; block < blocks; block++) {
      await duetWakes(duet, duetB, per, samples.duet);
      await bareWakes(holder, per, { publisher }, samples.bareHttp);
      await bareWakes(holder, per, { redis: redis.client }, samples.bareDirect);
    }
    const wake = {
      duet: summarizeWakes(samples.duet),
      bareHttp: summarizeWakes(samples.bareHttp),
      bareDirect: summarizeWakes(samples.bareDirect),
      p99Ratio: 0,
    };
    wake.p99Ratio = wake.duet.p99Ms / wake.bareHttp.p99Ms;
    log(
      `wake p50/p99 ms: duet ${wake.duet.p50Ms.toFixed(2)}/${wake.duet.p99Ms.toFixed(2)}, bare ${wake.bareHttp.p50Ms.toFixed(2)}/${wake.bareHttp.p99Ms.toFixed(2)}, direct ${wake.bareDirect.p50Ms.toFixed(2)}/${wake.bareDirect.p99Ms.toFixed(2)}`,
    );
    await stopAll();

    // ---- 3: capacity -------------------------------------------------------------------------
    const capacity = [];
    for (const n of PLAN.capacity) {
      const result = await runCapacity(redis.url, redis.client, n, PLAN.capacityWindowMs);
      capacity.push(result);
      log(
        `capacity ${n}: ${result.rssPerWaitingKb.toFixed(1)} KB RSS each, eld p99 ${result.eldP99Ms.toFixed(1)} ms, redis connections ${result.redisConnectionsAt0}/${result.redisConnectionsAtN}`,
      );
    }

    // ---- targets -----------------------------------------------------------------------------
    const largest = capacity.at(-1)!;
    const waitingLife = quiet.find((c) => c.shape.startsWith("recv waits"))!;
    const readyLife = quiet[0]!;
    const limitedLife = quiet.find((c) => c.shape.endsWith("rate limits on"));
    const targets: TargetCheck[] = [
      {
        target: "message-cycle throughput",
        goal: ">= 0.8 x bare Express, in the rounds' throughput and in server CPU per message",
        measured: `${ratios.toExpress.toFixed(2)} x (median of per-round ratios); by server CPU per message ${ratios.cpuToExpress.toFixed(2)} x; peak to peak ${ratios.peakToExpress.toFixed(2)} x`,
        // Throughput alone swings by +-0.15 between runs on this machine; CPU per message (its
        // inverse at saturation) does not, so both must clear the bar.
        met: ratios.toExpress >= 0.8 && ratios.cpuToExpress >= 0.8,
      },
      {
        target: "Redis round trips per message life (rate limits off)",
        goal: "<= 3 plus the wake publish; a recv that waits adds its re-read after the wake",
        measured:
          `${readyLife.roundTripsTotal.toFixed(2)} when recv finds the message, ${waitingLife.roundTripsTotal.toFixed(2)} when it waits, ` +
          `${underLoad.roundTripsTotal.toFixed(2)} under load; ${limitedLife?.roundTripsTotal.toFixed(2)} with the per-IP rate limits on`,
        met: readyLife.roundTripsTotal <= 3.001 && waitingLife.roundTripsTotal <= 4.001,
      },
      {
        target: "cross-node wake p50",
        goal: "< 1 ms",
        measured: `${wake.duet.p50Ms.toFixed(2)} ms`,
        met: wake.duet.p50Ms < 1,
      },
      {
        target: "cross-node wake p99",
        goal: "< 1.5 x bare node:http wake p99",
        measured: `${wake.p99Ratio.toFixed(2)} x (${wake.duet.p99Ms.toFixed(2)} vs ${wake.bareHttp.p99Ms.toFixed(2)} ms)`,
        met: wake.p99Ratio < 1.5,
      },
      {
        target: `RSS per waiting recv at ${largest.waiting}`,
        goal: "<= 16 KB",
        measured: `${largest.rssPerWaitingKb.toFixed(1)} KB`,
        met: largest.rssPerWaitingKb <= 16,
      },
      {
        target: `Redis connections per node at ${largest.waiting}`,
        goal: "<= 3",
        measured: String(largest.redisConnectionsAtN),
        met: largest.redisConnectionsAtN <= 3,
      },
      {
        target: `event-loop delay p99 at ${largest.waiting} waiting`,
        goal: "< 20 ms",
        measured: `${largest.eldP99Ms.toFixed(1)} ms`,
        met: largest.eldP99Ms < 20,
      },
    ];

    const results: RunResults = {
      meta: {
        date: new Date().toISOString(),
        machine: machine(),
        node: process.version,
        redis: redisVersion,
        pinned: pinningWorks(),
        smoke,
        seconds: Math.round((Date.now() - started) / 1000),
        loadAverage: { before: Number(loadBefore.toFixed(2)), after: Number(loadavg()[0]!.toFixed(2)) },
      },
      cycle: { sweep, peak, rounds, ratios },
      wake,
      capacity,
      redisCost: { quiet, underLoad },
      targets,
    };
    const dir = join(__dirname, "..", "results", smoke ? "smoke" : "");
    mkdirSync(dir, { recursive: true });
    const table = markdown(results);
    writeFileSync(join(dir, "latest.json"), `${JSON.stringify(results, null, 2)}\n`);
    writeFileSync(join(dir, "latest.md"), `# duet benchmark results\n\n${table}`);
    writeFileSync(
      join(dir, "chart.svg"),
      chart(sweep, `duet vs its stack's ceilings, message cycle (${results.meta.date.slice(0, 10)}, ${machine()})`),
    );
    if (quiet) kept.push(`${table}\n`);
    else process.stdout.write(`${table}\n`);
    // The harness must not rot quietly: any failed call or an empty measurement fails the run.
    const cycles = [...Object.values(sweep).flat(), ...Object.values(perRound).flat()];
    const broken = cycles.filter((c) => c.errors > 0 || c.messages === 0);
    if (broken.length > 0) throw new Error(`${broken.length} message-cycle runs had errors or delivered nothing`);
    log(`done in ${results.meta.seconds} s; wrote ${dir}`);
    if (quiet)
      process.stderr.write(
        `bench smoke: every scenario ran in ${results.meta.seconds} s (figures: ${join(dir, "latest.md")}; DUET_FIGURES=1 prints them)\n`,
      );
  } finally {
    await stopAll();
    await redis.stop();
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(kept.join(""));
    process.stderr.write(`bench failed: ${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(1);
  },
);
