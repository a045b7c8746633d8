// Jest globalSetup: builds the server when its dist is older than its sources (the process
// target, and the unit tests that run dist/ files, need it), then starts the shared Redis
// fixtures the selected test files need, and only those (support/selection.ts reads each
// file): one Redis (REDIS_URL), a three-master Cluster (REDIS_CLUSTER_NODES), a master with
// two replicas and three sentinels (REDIS_SENTINELS). A variable already set names a server
// to use instead. The workers start after this and inherit the variables.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureBuilt } from "../../../testkit/src/build";
import { type Fixture, FIXTURES, fixturesOf, selectedTargets } from "./selection";

declare global {
  var __TEST_REDIS_STOP__: (() => Promise<void>) | undefined;
  var __TEST_CLUSTER_STOP__: (() => Promise<void>) | undefined;
  var __TEST_SENTINEL_STOP__: (() => Promise<void>) | undefined;
  var __TEST_TMPDIR__: string | undefined;
  /** The test files of this run, left by testkit's jest-sequencer.cjs. */
  var __DUET_SELECTED_TESTS__: string[] | undefined;
}

const ROOT = join(__dirname, "../../../..");

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
    await Promise.allSettled([
      globalThis.__TEST_REDIS_STOP__?.(),
      globalThis.__TEST_CLUSTER_STOP__?.(),
      globalThis.__TEST_SENTINEL_STOP__?.(),
    ]);
    rmSync(globalThis.__TEST_TMPDIR__, { recursive: true, force: true });
    throw error;
  }
}

/** The fixtures the run's files need; all of them when the run's files are not known. */
function fixturesNeeded(): Set<Fixture> {
  const files = globalThis.__DUET_SELECTED_TESTS__;
  if (!files) return new Set(FIXTURES);
  const targets = selectedTargets(); // an unknown name in DUET_TARGETS stops the run here
  return new Set(files.flatMap((file) => [...fixturesOf(readFileSync(file, "utf8"), targets)]));
}

async function setUp() {
  const needed = fixturesNeeded();
  ensureBuilt(ROOT);
  // The built fixtures (jest loads this file without the module mapping the tests have).
  const { spawnCluster, spawnRedis, spawnSentinelTopology, which } = await import("@duet/testkit");
  // In parallel; when one fails, the others still finish starting, so the catch above stops them.
  const started = await Promise.allSettled([
    // The Sentinel target. down-after 10 s: no failover is wanted here, and a loaded CI
    // machine must not fake one.
    needed.has("sentinel") && !process.env.REDIS_SENTINELS
      ? spawnSentinelTopology({ downAfterMs: 10_000 }).then((topology) => {
          process.env.REDIS_SENTINELS = topology.sentinels;
          process.env.REDIS_SENTINEL_NAME = topology.name;
          globalThis.__TEST_SENTINEL_STOP__ = topology.stop;
        })
      : undefined,
    needed.has("cluster") && !process.env.REDIS_CLUSTER_NODES
      ? spawnCluster(3).then((cluster) => {
          process.env.REDIS_CLUSTER_NODES = cluster.seeds;
          globalThis.__TEST_CLUSTER_STOP__ = cluster.stop;
        })
      : undefined,
    // One Redis: a redis-server spawned from PATH (verified on its port), else a
    // testcontainers Redis (needs Docker); TEST_REDIS=container forces the container.
    needed.has("redis") && (!process.env.REDIS_URL || process.env.TEST_REDIS)
      ? (process.env.TEST_REDIS !== "container" && which("redis-server") !== undefined
          ? spawnRedis()
          : startContainer()
        )
          .catch((error: Error) => {
            throw new Error(
              `No Redis for tests: set REDIS_URL, install redis-server, or run Docker (${error.message})`,
            );
          })
          .then((redis) => {
            process.env.REDIS_URL = redis.url;
            globalThis.__TEST_REDIS_STOP__ = redis.stop;
          })
      : undefined,
  ]);
  const failed = started.find((result) => result.status === "rejected");
  if (failed) throw failed.reason;
}
