// Jest globalSetup: one Redis for the whole run. REDIS_URL if set; else a redis-server
// spawned from PATH (verified on its port); else a testcontainers Redis (needs Docker).
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

declare global {
  var __TEST_REDIS_STOP__: (() => Promise<void>) | undefined;
  var __TEST_CLUSTER_STOP__: (() => Promise<void>) | undefined;
  var __TEST_SENTINEL_STOP__: (() => Promise<void>) | undefined;
  var __TEST_TMPDIR__: string | undefined;
}

async function startContainer() {
  const { RedisContainer } = await import("@testcontainers/redis");
  const container = await new RedisContainer("redis:7-alpine").start();
  return { url: container.getConnectionUrl(), stop: async () => void (await container.stop()) };
}

export default async function globalSetup() {
  // Everything this run writes to the temp dir (Redis directories, including those of
  // servers a test killed and never stopped) goes under one directory that the global
  // teardown removes, whether the tests passed or not. Workers inherit TMPDIR.
  globalThis.__TEST_TMPDIR__ = mkdtempSync(join(tmpdir(), "duet-test-run-"));
  process.env.TMPDIR = globalThis.__TEST_TMPDIR__;
  try {
    await setUp();
  } catch (error) {
    // Jest skips the global teardown when the setup fails: undo what was started here.
    await Promise.all([
      globalThis.__TEST_REDIS_STOP__?.(),
      globalThis.__TEST_CLUSTER_STOP__?.(),
      globalThis.__TEST_SENTINEL_STOP__?.(),
    ]);
    rmSync(globalThis.__TEST_TMPDIR__, { recursive: true, force: true });
    throw error;
  }
}

async function setUp() {
  // The black-box target runs the built server: build it from the current source (~2 s).
  // (the shared fixtures too: jest loads this file without its module mapping).
  execFileSync("pnpm", ["--filter", "@duet/server...", "--filter", "@duet/testkit", "build"], {
    cwd: join(__dirname, "../../../.."),
    stdio: "ignore",
  });
  const { spawnCluster, spawnRedis, spawnSentinelTopology, which } = await import("@duet/testkit");
  // The Sentinel target: REDIS_SENTINELS (+ REDIS_SENTINEL_NAME) if set, else a master, two
  // replicas and three sentinels spawned here. down-after 10 s: no failover is wanted
  // here, and a loaded CI machine must not fake one.
  if (!process.env.REDIS_SENTINELS) {
    const topology = await spawnSentinelTopology({ downAfterMs: 10_000 });
    process.env.REDIS_SENTINELS = topology.sentinels;
    process.env.REDIS_SENTINEL_NAME = topology.name;
    globalThis.__TEST_SENTINEL_STOP__ = topology.stop;
  }
  // The cluster targets: REDIS_CLUSTER_NODES if set, else three masters spawned here.
  if (!process.env.REDIS_CLUSTER_NODES) {
    const cluster = await spawnCluster(3);
    process.env.REDIS_CLUSTER_NODES = cluster.seeds;
    globalThis.__TEST_CLUSTER_STOP__ = cluster.stop;
  }
  if (process.env.REDIS_URL && !process.env.TEST_REDIS) return;
  const useBinary = process.env.TEST_REDIS !== "container" && which("redis-server") !== undefined;
  const redis = await (useBinary ? spawnRedis() : startContainer()).catch((error: Error) => {
    throw new Error(`No Redis for tests: set REDIS_URL, install redis-server, or run Docker (${error.message})`);
  });
  process.env.REDIS_URL = redis.url; // workers start after globalSetup and inherit it
  globalThis.__TEST_REDIS_STOP__ = redis.stop;
}
