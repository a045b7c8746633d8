// `pnpm --filter @duet/bench rate-burst [--limit N] [--rounds R] [--baseline DIST]
// [--connections C] [--pipelining P] [--smoke]`: what one client gets through the per-IP
// request limit when it pipelines a burst of 1.5 × the limit to 1, 2 and 3 nodes on one Redis
// at once (tokenless `GET /v1/status`: 401 is a call the limit let through, 429 one it
// refused). This build, and a baseline dist when there is one. Writes results/rate-burst.md.
// docs/security.md, "Rate limits"; packages/bench/README.md.
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { Pool } from "undici";
import { USER_AGENT } from "@duet/protocol";
import { duetEnv, startRedis, startServer, type RedisProcess, type ServerProcess } from "./processes.js";

const WINDOW_SECONDS = 3600;

function option(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

/** Waits until the epoch-aligned window has at least needMs left (a burst must not straddle two). */
async function roomInWindow(needMs: number): Promise<void> {
  const left = WINDOW_SECONDS * 1000 - (Date.now() % (WINDOW_SECONDS * 1000));
  if (left < needMs) await new Promise((r) => setTimeout(r, left + 100));
}

async function commandsProcessed(redis: RedisProcess): Promise<number> {
  const info = await redis.client.info("stats");
  return Number(/total_commands_processed:(\d+)/.exec(info)?.[1] ?? Number.NaN);
}

interface Burst {
  admitted: number;
  refused: number;
  errors: number;
  redisCommands: number;
}

/** perNode calls to each of the nodes at once, all from `address`. */
async function burst(redis: RedisProcess, pools: Pool[], perNode: number, address: string): Promise<Burst> {
  const before = await commandsProcessed(redis);
  const statuses = await Promise.all(
    pools.flatMap((pool) =>
      Array.from({ length: perNode }, () =>
        pool
          .request({
            method: "GET",
            path: "/v1/status?code=zzzz-zzzz-zzzz",
            headers: { "user-agent": USER_AGENT, "x-forwarded-for": address },
          })
          .then(
            async (response) => {
              await response.body.dump();
              return response.statusCode;
            },
            () => 0,
          ),
      ),
    ),
  );
  // The burst's own INFO call is one of the commands counted: taken off.
  const redisCommands = (await commandsProcessed(redis)) - before - 1;
  return {
    admitted: statuses.filter((s) => s === 401).length,
    refused: statuses.filter((s) => s === 429).length,
    errors: statuses.filter((s) => s !== 401 && s !== 429).length,
    redisCommands,
  };
}

async function main(): Promise<void> {
  const smoke = process.argv.includes("--smoke");
  const limit = Number(option("--limit") ?? (smoke ? 60 : 600));
  const rounds = Number(option("--rounds") ?? (smoke ? 1 : 3));
  const baseline = resolve(option("--baseline") ?? `${__dirname}/../../server/dist-base`);
  const builds: [string, string | undefined][] = [["after", undefined]];
  if (!smoke && existsSync(baseline)) builds.unshift(["before", baseline]);
  const perNode = Math.ceil(limit * 1.5);
  const connections = Number(option("--connections") ?? 32);
  const pipelining = Number(option("--pipelining") ?? 32);
  const redis = await startRedis();
  const servers: ServerProcess[] = [];
  const lines: string[] = [];
  let failed = false;
  try {
    for (const [b, [build, dist]] of builds.entries()) {
      const env = duetEnv(redis.url, {
        REDIS_KEY_PREFIX: `${build}:`,
        RATE_LIMIT_REQUESTS: String(limit),
        RATE_LIMIT_WINDOW_SECONDS: String(WINDOW_SECONDS),
        // Each burst is a client of its own: X-Forwarded-For from the loopback "proxy".
        TRUST_PROXY: "1",
        ...(dist ? { DUET_SERVER_DIST: dist } : {}),
      });
      const nodes: ServerProcess[] = [];
      for (let i = 0; i < 3; i++) nodes.push(await startServer(`duet ${build} ${i}`, "duet-node.js", { env }));
      servers.push(...nodes);
      const pools = nodes.map((node) => new Pool(node.url, { connections, pipelining, keepAliveTimeout: 60_000 }));
      try {
        for (const k of [1, 2, 3]) {
          const results: Burst[] = [];
          for (let round = 0; round < rounds; round++) {
            await roomInWindow(60_000);
            results.push(await burst(redis, pools.slice(0, k), perNode, `10.${b}.${k}.${round + 1}`));
          }
          const admitted = results.map((r) => r.admitted);
          const worst = Math.max(...admitted);
          const errors = results.reduce((n, r) => n + r.errors, 0);
          if (errors > 0 || admitted.some((a) => a === 0)) failed = true;
          const line = `| ${build} | ${k} | ${perNode * k} | ${admitted.join(", ")} | ${(worst / limit).toFixed(2)}x | ${results.map((r) => r.redisCommands).join(", ")} | ${errors} |`;
          lines.push(line);
          process.stderr.write(`${line}\n`);
        }
      } finally {
        await Promise.all(pools.map((pool) => pool.destroy()));
        // Stopped before the next build's nodes start: their heartbeats would be counted too.
        await Promise.allSettled(nodes.map((s) => s.stop()));
      }
    }
  } finally {
    await Promise.allSettled(servers.map((s) => s.stop()));
    await redis.stop();
  }
  const report =
    `rate-burst: RATE_LIMIT_REQUESTS ${limit} per ${WINDOW_SECONDS} s, a burst of ${perNode} calls to each node used ` +
    `(${connections} connections × ${pipelining} pipelined per node), ${rounds} round(s), a fresh client address each` +
    `${builds.length > 1 ? `; before = ${baseline}` : ""}\n\n` +
    "| build | nodes | calls sent | admitted (each round) | worst / limit | Redis commands (each round) | errors |\n" +
    "|---|---|---|---|---|---|---|\n" +
    `${lines.join("\n")}\n`;
  process.stdout.write(report);
  if (!smoke) {
    const dir = join(__dirname, "../results");
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "rate-burst.md"), report);
  }
  if (failed) throw new Error("a burst had errors, or admitted nothing");
}

if (require.main === module)
  main().then(
    () => process.exit(0),
    (error) => {
      process.stderr.write(`rate-burst failed: ${error instanceof Error ? error.stack : String(error)}\n`);
      process.exit(1);
    },
  );
