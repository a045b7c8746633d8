// `pnpm --filter @duet/bench limits [rooms] [rounds] [baseline dist]`: what the rate limits
// cost on the message cycle, against the bare Express relay doing the same Redis work in one
// script per call (ceiling-node.ts: no validation, token hashing, limits or headers). Four
// duet nodes: this build and a baseline build (a copy of an older packages/server/dist,
// default packages/server/dist-base, as ab.ts documents), each with the limits on and off.
// "On" is the defaults' code path: both per-IP limits and ROOMS_PER_IP counting, with budgets
// so high that the one load generator (one IP) is never refused, so what is measured is the
// counting, not cheaper 429s. Rounds are interleaved and rotated; the figures are medians of
// per-round values. `--smoke`: one short round (the harness cannot rot).
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { LOAD_CPU, duetEnv, pin, startRedis, startServer, type ServerProcess } from "./processes.js";
import { runCycle, type CycleResult } from "./scenarios/message-cycle.js";
import { median } from "./stats.js";

const HIGH = "1000000000";
/** The limits on: every counter runs (the defaults' code path), none refuses the generator. */
export const LIMITS_ON = { RATE_LIMIT_REQUESTS: HIGH, RATE_LIMIT_ROOMS: HIGH, ROOMS_PER_IP: HIGH };

async function main(): Promise<void> {
  const smoke = process.argv.includes("--smoke");
  const args = process.argv.slice(2).filter((a) => a !== "--smoke");
  const rooms = Number(args[0] ?? (smoke ? 4 : 32));
  const rounds = Number(args[1] ?? (smoke ? 1 : 7));
  const baseline = resolve(args[2] ?? `${__dirname}/../../server/dist-base`);
  const withBaseline = existsSync(baseline);
  const measureMs = smoke ? 500 : 2000;
  pin(process.pid, LOAD_CPU);
  const redis = await startRedis();
  const servers: ServerProcess[] = [];
  try {
    const duet = (name: string, prefix: string, extra: Record<string, string>) =>
      startServer(name, "duet-node.js", { env: duetEnv(redis.url, { REDIS_KEY_PREFIX: prefix, ...extra }) });
    const targets: Record<string, ServerProcess> = {
      "after, limits on": await duet("duet (limits on)", "on:", LIMITS_ON),
      "after, limits off": await duet("duet (limits off)", "off:", {}),
    };
    if (withBaseline) {
      targets["before, limits on"] = await duet("duet before (limits on)", "bon:", {
        ...LIMITS_ON,
        DUET_SERVER_DIST: baseline,
      });
      targets["before, limits off"] = await duet("duet before (limits off)", "boff:", { DUET_SERVER_DIST: baseline });
    }
    targets.minimal = await startServer("bare Express", "ceiling-node.js", {
      args: ["express"],
      env: { REDIS_URL: redis.url },
    });
    servers.push(...Object.values(targets));
    const names = Object.keys(targets);
    const results: Record<string, CycleResult[]> = Object.fromEntries(names.map((n) => [n, []]));
    if (!smoke)
      for (const t of names)
        await runCycle(targets[t]!.url, rooms, { warmupMs: 500, measureMs: 1000, server: targets[t] });
    for (let round = 0; round < rounds; round++) {
      const shift = round % names.length;
      for (const t of [...names.slice(shift), ...names.slice(0, shift)]) {
        const result = await runCycle(targets[t]!.url, rooms, {
          warmupMs: smoke ? 200 : 500,
          measureMs,
          server: targets[t],
        });
        if (result.messages === 0) throw new Error(`${t}: no message went through (${result.errors} errors)`);
        results[t]!.push(result);
      }
      process.stderr.write(
        `round ${round + 1}/${rounds}: ${names.map((t) => `${t} ${results[t]!.at(-1)!.messagesPerSecond.toFixed(0)} msg/s`).join(", ")}\n`,
      );
    }
    const perRound = (f: (i: number) => number) => median(Array.from({ length: rounds }, (_, i) => f(i)));
    const rate = (t: string, i: number) => results[t]![i]!.messagesPerSecond;
    const cpu = (t: string, i: number) => results[t]![i]!.serverCpuUsPerMessage ?? Number.NaN;
    const line = (t: string) =>
      `| ${t} | ${perRound((i) => rate(t, i)).toFixed(0)} | ${perRound((i) => cpu(t, i)).toFixed(0)} | ${perRound((i) => rate(t, i) / rate("minimal", i)).toFixed(2)} | ${perRound((i) => cpu("minimal", i) / cpu(t, i)).toFixed(2)} | ${results[t]!.reduce((n, r) => n + r.errors, 0)} |`;
    process.stdout.write(
      `limits: ${rooms} rooms, median of ${rounds} interleaved rounds of ${measureMs / 1000} s${withBaseline ? `, before = ${baseline}` : " (no baseline build: after only)"}\n\n` +
        "| Server | messages/s | server CPU us per message | throughput / minimal | minimal CPU / its CPU | errors (all rounds) |\n|---|---|---|---|---|---|\n" +
        `${names.map(line).join("\n")}\n`,
    );
  } finally {
    await Promise.allSettled(servers.map((s) => s.stop()));
    await redis.stop();
  }
}

if (require.main === module)
  main().then(
    () => process.exit(0),
    (error) => {
      process.stderr.write(`limits failed: ${error instanceof Error ? error.stack : String(error)}\n`);
      process.exit(1);
    },
  );
