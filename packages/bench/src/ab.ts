// `pnpm --filter @duet/bench ab <baseline dist> [rooms] [rounds]`: an A/B of two builds of
// the server on the message cycle, with the bare Express ceiling in the same rounds. The
// baseline is a copy of an older packages/server/dist (e.g. `cp -r dist dist-base` before a
// change; it must sit in packages/server so it resolves the same dependencies).
// `ab --runtime <node binary> [rooms] [rounds]`: the same build on two runtimes, the baseline
// on that binary (how the pinned Node was chosen, docs/runtime.md). Rounds are
// interleaved and rotated; the figures are medians of per-round values, the only ones that
// mean something on a shared, noisy machine.
import { resolve } from "node:path";
import { LOAD_CPU, duetEnv, pin, startRedis, startServer, type ServerProcess } from "./processes.js";
import { runCycle, type CycleResult } from "./scenarios/message-cycle.js";
import { median } from "./stats.js";

async function main(): Promise<void> {
  const byRuntime = process.argv[2] === "--runtime";
  const args = byRuntime ? process.argv.slice(4) : process.argv.slice(3);
  const baseline = byRuntime ? process.argv[3] : process.argv[2];
  if (!baseline)
    throw new Error("usage: ab <baseline server dist> [rooms] [rounds] | ab --runtime <node binary> [rooms] [rounds]");
  const rooms = Number(args[0] ?? 16);
  const rounds = Number(args[1] ?? 9);
  pin(process.pid, LOAD_CPU);
  const redis = await startRedis();
  const servers: ServerProcess[] = [];
  try {
    const targets = {
      current: await startServer(`duet (current, Node ${process.versions.node})`, "duet-node.js", {
        env: duetEnv(redis.url, { REDIS_KEY_PREFIX: "cur:" }),
      }),
      baseline: byRuntime
        ? await startServer(`duet (current, ${baseline})`, "duet-node.js", {
            env: duetEnv(redis.url, { REDIS_KEY_PREFIX: "base:" }),
            execPath: resolve(baseline),
          })
        : await startServer("duet (baseline)", "duet-node.js", {
            env: duetEnv(redis.url, { REDIS_KEY_PREFIX: "base:", DUET_SERVER_DIST: resolve(baseline) }),
          }),
      express: await startServer("bare Express", "ceiling-node.js", {
        args: ["express"],
        env: { REDIS_URL: redis.url },
      }),
    };
    servers.push(...Object.values(targets));
    const names = Object.keys(targets) as (keyof typeof targets)[];
    const results: Record<string, CycleResult[]> = { current: [], baseline: [], express: [] };
    // One warm-up round, not counted.
    for (const t of names)
      await runCycle(targets[t].url, rooms, { warmupMs: 500, measureMs: 1000, server: targets[t] });
    for (let round = 0; round < rounds; round++) {
      for (const t of [...names.slice(round % 3), ...names.slice(0, round % 3)]) {
        results[t]!.push(await runCycle(targets[t].url, rooms, { warmupMs: 500, measureMs: 2000, server: targets[t] }));
      }
      process.stderr.write(
        `round ${round + 1}/${rounds}: ${names.map((t) => `${t} ${results[t]!.at(-1)!.messagesPerSecond.toFixed(0)} msg/s ${results[t]!.at(-1)!.serverCpuUsPerMessage!.toFixed(0)} us/msg`).join(", ")}\n`,
      );
    }
    const perRound = (f: (i: number) => number) => median(Array.from({ length: rounds }, (_, i) => f(i)));
    const cpu = (t: string, i: number) => results[t]![i]!.serverCpuUsPerMessage!;
    const rate = (t: string, i: number) => results[t]![i]!.messagesPerSecond;
    const p99 = (t: string, i: number) => results[t]![i]!.p99Ms;
    const line = (t: string) =>
      `| ${t} | ${perRound((i) => rate(t, i)).toFixed(0)} | ${perRound((i) => cpu(t, i)).toFixed(0)} | ${perRound((i) => p99(t, i)).toFixed(1)} | ${perRound((i) => rate(t, i) / rate("express", i)).toFixed(2)} | ${perRound((i) => cpu("express", i) / cpu(t, i)).toFixed(2)} |`;
    process.stdout.write(
      `${rooms} rooms, median of ${rounds} interleaved rounds of 2 s\n\n| Server | messages/s | server CPU us per message | p99 ms | throughput / bare Express | bare Express CPU / its CPU |\n|---|---|---|---|---|---|\n` +
        `${names.map(line).join("\n")}\n\ncurrent / baseline: throughput ${perRound((i) => rate("current", i) / rate("baseline", i)).toFixed(2)}, CPU per message ${perRound((i) => cpu("current", i) / cpu("baseline", i)).toFixed(2)}, p99 ${perRound((i) => p99("current", i) / p99("baseline", i)).toFixed(2)}\n`,
    );
  } finally {
    await Promise.allSettled(servers.map((s) => s.stop()));
    await redis.stop();
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`ab failed: ${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(1);
  },
);
