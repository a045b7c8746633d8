// `pnpm --filter @duet/bench bench:write-ack`: the cost of REDIS_WRITE_ACK_REPLICAS. One
// master with one replica (both redis-server on free ports, pinned beside the load
// generator), three duet nodes on it, with write-ack 0, 1 and all (WAIT 1 and an INFO
// replication per change: the price of counting the master's replicas), and the message
// cycle (send -> recv -> ack, both seats) run against each in interleaved rounds.
// Prints a table and writes results/write-ack.json and results/write-ack.md.
import { mkdirSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { spawnRedis, redisInfo } from "@duet/testkit";
import { LOAD_CPU, duetEnv, pin, startServer } from "./processes.js";
import { runCycle, type CycleResult } from "./scenarios/message-cycle.js";
import { median } from "./stats.js";

const smoke = process.argv.includes("--smoke");
const ROUNDS = smoke ? 1 : 7;
const ROUND_MS = smoke ? 500 : 2000;
const LEVELS = smoke ? [4] : [1, 8, 32];

const log = (line: string) => process.stderr.write(`[write-ack ${new Date().toISOString().slice(11, 19)}] ${line}\n`);

async function main(): Promise<void> {
  pin(process.pid, LOAD_CPU);
  const loadBefore = loadavg()[0]!;
  const master = await spawnRedis(["--maxclients", "50000"]);
  const replica = await spawnRedis(["--replicaof", "127.0.0.1", String(master.port)]);
  pin(master.process.pid!, LOAD_CPU);
  pin(replica.process.pid!, LOAD_CPU);
  const servers: Awaited<ReturnType<typeof startServer>>[] = [];
  try {
    for (
      const deadline = Date.now() + 10_000;
      (await redisInfo(replica.port, "replication"))?.master_link_status !== "up";
      await new Promise((r) => setTimeout(r, 50))
    ) {
      if (Date.now() > deadline) throw new Error("the replica never synced");
    }
    const arms = { ack0: "0", ack1: "1", ackall: "all" } as const;
    const names = Object.keys(arms);
    const origin: Record<string, string> = {};
    for (const [name, replicas] of Object.entries(arms)) {
      const server = await startServer(`duet ${name}`, "duet-node.js", {
        env: duetEnv(master.url, {
          REDIS_KEY_PREFIX: `${name}:`,
          REDIS_WRITE_ACK_REPLICAS: replicas,
          REDIS_WRITE_ACK_TIMEOUT_MS: "500",
        }),
      });
      servers.push(server);
      origin[name] = server.url;
    }
    const results: Record<number, Record<string, CycleResult[]>> = {};
    for (const rooms of LEVELS) {
      results[rooms] = { ack0: [], ack1: [], ackall: [] };
      for (let round = 0; round < ROUNDS; round++) {
        // Rotate which arm goes first: none always runs after another's load.
        const order = names.map((_, i) => names[(i + round) % names.length]!);
        for (const arm of order) {
          const server = servers[names.indexOf(arm)]!;
          results[rooms]![arm]!.push(
            await runCycle(origin[arm]!, rooms, { warmupMs: smoke ? 200 : 500, measureMs: ROUND_MS, server }),
          );
        }
        log(
          `rooms ${rooms} round ${round + 1}/${ROUNDS}: ${order.map((a) => `${a} ${results[rooms]![a]!.at(-1)!.messagesPerSecond.toFixed(0)} msg/s`).join(", ")}`,
        );
      }
    }
    const rows = LEVELS.map((rooms) => {
      const of = (arm: string) => results[rooms]![arm]!;
      const summary = (arm: string) => ({
        messagesPerSecond: median(of(arm).map((c) => c.messagesPerSecond)),
        p50Ms: median(of(arm).map((c) => c.p50Ms)),
        p99Ms: median(of(arm).map((c) => c.p99Ms)),
        serverCpuUsPerMessage: median(of(arm).map((c) => c.serverCpuUsPerMessage ?? Number.NaN)),
        errors: of(arm).reduce((sum, c) => sum + c.errors, 0),
      });
      return {
        rooms,
        ack0: summary("ack0"),
        ack1: summary("ack1"),
        ackall: summary("ackall"),
        // Per-round ratios, then their median: each round's runs saw the same noise.
        throughputRatio: median(of("ack1").map((c, i) => c.messagesPerSecond / of("ack0")[i]!.messagesPerSecond)),
        allThroughputRatio: median(of("ackall").map((c, i) => c.messagesPerSecond / of("ack1")[i]!.messagesPerSecond)),
        allCpuRatio: median(
          of("ackall").map(
            (c, i) => (c.serverCpuUsPerMessage ?? Number.NaN) / (of("ack1")[i]!.serverCpuUsPerMessage ?? Number.NaN),
          ),
        ),
      };
    });
    const loadAfter = loadavg()[0]!;
    const fmt = (n: number, digits = 0) =>
      n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
    const md = [
      `Message cycle (send -> recv -> ack, both seats) on one master with one replica, write-ack 0, 1 (WAIT 1 500 ms) and all (WAIT 1 and INFO replication), median of ${ROUNDS} interleaved rounds of ${ROUND_MS / 1000} s.`,
      `Run ${new Date().toISOString()}; 1-minute loadavg ${loadBefore.toFixed(2)} before, ${loadAfter.toFixed(2)} after (2 cores, shared).`,
      "",
      "| rooms | msg/s (0 / 1 / all) | ratio 1 / 0 | ratio all / 1 | send->recv p50 ms (0 / 1 / all) | p99 ms (0 / 1 / all) | server CPU us per message (0 / 1 / all) | CPU ratio all / 1 | errors (0 / 1 / all) |",
      "|---|---|---|---|---|---|---|---|---|",
      ...rows.map(
        (r) =>
          `| ${r.rooms} | ${fmt(r.ack0.messagesPerSecond)} / ${fmt(r.ack1.messagesPerSecond)} / ${fmt(r.ackall.messagesPerSecond)} | ${fmt(r.throughputRatio, 2)} | ${fmt(r.allThroughputRatio, 2)} | ${fmt(r.ack0.p50Ms, 2)} / ${fmt(r.ack1.p50Ms, 2)} / ${fmt(r.ackall.p50Ms, 2)} | ${fmt(r.ack0.p99Ms, 2)} / ${fmt(r.ack1.p99Ms, 2)} / ${fmt(r.ackall.p99Ms, 2)} | ${fmt(r.ack0.serverCpuUsPerMessage)} / ${fmt(r.ack1.serverCpuUsPerMessage)} / ${fmt(r.ackall.serverCpuUsPerMessage)} | ${fmt(r.allCpuRatio, 2)} | ${r.ack0.errors} / ${r.ack1.errors} / ${r.ackall.errors} |`,
      ),
      "",
    ].join("\n");
    process.stdout.write(`${md}\n`);
    const dir = join(__dirname, "..", "results", smoke ? "smoke" : "");
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      join(dir, "write-ack.json"),
      `${JSON.stringify({ rounds: ROUNDS, roundMs: ROUND_MS, loadBefore, loadAfter, rows }, null, 2)}\n`,
    );
    writeFileSync(join(dir, "write-ack.md"), md);
  } finally {
    await Promise.allSettled(servers.map((s) => s.stop()));
    await Promise.allSettled([replica.stop(), master.stop()]);
  }
}

main().catch((error) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
